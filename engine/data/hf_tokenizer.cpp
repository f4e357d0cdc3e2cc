// Hugging Face tokenizer.json, BPE models: byte-level BPE as GPT-2, Llama 3 and Qwen2/2.5/3 use
// it (Split pre-tokenizer with the file's regex, ByteLevel), and SentencePiece-style BPE with
// byte fallback (Llama 2, TinyLlama, Mistral: Prepend/Replace normalizer or a Metaspace
// pre-tokenizer, <0xNN> tokens). Encoding follows huggingface/tokenizers (Rust): added tokens are
// split out first (leftmost, then longest), each remaining segment is normalized, pre-tokenized
// and BPE-merged, lowest merge rank first and on equal ranks the leftmost pair. The reference in
// the tests is the npm package @lenml/tokenizers (a port of transformers.js), run under node.
//
// Regexes run on PCRE2 (UTF + UCP, JIT when available). Known differences from the JS
// reference, all in the regex engines: PCRE2's \s is Unicode White_Space (U+0085 yes, U+FEFF
// no; JavaScript's \s is the reverse), and (?i:'s|...) also folds non-ASCII letters (ſ, K),
// which the JS port rewrites to ASCII-only classes. Invalid UTF-8 in the input is replaced by
// U+FFFD first (a Python or JS string cannot hold it either), so it does not round-trip.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "engine/core/error.h"
#include "engine/core/json_text.h"
#include "engine/data/byte_level.h"
#include "engine/data/tokenizer.h"
#include "engine/data/word_cache.h"

namespace tessera {

namespace {

using nlohmann::json;

// ----------------------------------------------------------------------------------------------
// UTF-8, NFC, regex

// Length of the valid UTF-8 sequence at s[i], or 0 when it is invalid or truncated.
size_t utf8_valid_len(std::string_view s, size_t i) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return 1;
    size_t need = (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : 0;
    if (need == 0 || i + need >= s.size()) return 0;  // bad lead byte, or truncated
    uint32_t cp = c & (0x3F >> need);
    for (size_t k = 1; k <= need; k++) {
        unsigned char d = (unsigned char)s[i + k];
        if ((d & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (d & 0x3F);
    }
    static const uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[need] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return need + 1;
}

// The text with each invalid byte replaced by U+FFFD.
std::string utf8_repair(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        size_t n = utf8_valid_len(s, i);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            i++;
        } else {
            out.append(s.substr(i, n));
            i += n;
        }
    }
    return out;
}

bool utf8_is_valid(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        size_t n = utf8_valid_len(s, i);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

// Unicode NFC through ICU (valid UTF-8 in and out).
std::string unicode_nfc(const std::string& s) {
    if (std::all_of(s.begin(), s.end(), [](char c) { return (unsigned char)c < 0x80; })) return s;
    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2* nfc = unorm2_getNFCInstance(&err);
    std::u16string u16(s.size() + 1, u'\0'), out;
    int32_t n16 = 0;
    u_strFromUTF8((UChar*)u16.data(), (int32_t)u16.size(), &n16, s.data(), (int32_t)s.size(), &err);
    TS_CHECK(U_SUCCESS(err), "NFC: UTF-8 -> UTF-16 failed: ", u_errorName(err));
    out.resize(n16 * 3 + 16);
    int32_t nout = unorm2_normalize(nfc, (const UChar*)u16.data(), n16, (UChar*)out.data(),
                                    (int32_t)out.size(), &err);
    TS_CHECK(U_SUCCESS(err), "NFC normalization failed: ", u_errorName(err));
    std::string r(nout * 3 + 4, '\0');
    int32_t n8 = 0;
    u_strToUTF8(r.data(), (int32_t)r.size(), &n8, (const UChar*)out.data(), nout, &err);
    TS_CHECK(U_SUCCESS(err), "NFC: UTF-16 -> UTF-8 failed: ", u_errorName(err));
    r.resize(n8);
    return r;
}

struct PcreCodeDeleter {
    void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct PcreMatchDataDeleter {
    void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// A compiled regex (UTF + UCP, JIT when the platform has it). Thread-safe: each call gets its
// own match data.
class Regex {
  public:
    // InputError naming `where` (file and key path) when the pattern does not compile.
    Regex(const std::string& pattern, const std::string& where) {
        int err = 0;
        PCRE2_SIZE offset = 0;
        code_.reset(pcre2_compile((PCRE2_SPTR)pattern.data(), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                  &err, &offset, nullptr));
        if (!code_) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            throw InputError(str_cat(where, ": regex does not compile at offset ", offset, ": ",
                                     (const char*)msg, " (pattern: ", pattern, ")"));
        }
        pcre2_jit_compile(code_.get(),
                          PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    }

    // Calls on_piece(begin, end, matched) for the matches and the gaps between them, in order.
    // `text` must be valid UTF-8.
    template <class F>
    void split(std::string_view text, F&& on_piece) const {
        std::unique_ptr<pcre2_match_data, PcreMatchDataDeleter> md(
            pcre2_match_data_create_from_pattern(code_.get(), nullptr));
        size_t pos = 0, last = 0;
        while (pos <= text.size()) {
            int rc = pcre2_match(code_.get(), (PCRE2_SPTR)text.data(), text.size(), pos,
                                 PCRE2_NO_UTF_CHECK, md.get(), nullptr);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            TS_CHECK(rc >= 0, "pcre2_match failed with code ", rc);
            PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
            size_t b = ov[0], e = ov[1];
            if (e == b) {  // empty match: skip one code point
                if (b >= text.size()) break;
                pos = b + std::max<size_t>(1, utf8_valid_len(text, b));
                continue;
            }
            if (b > last) on_piece(last, b, false);
            on_piece(b, e, true);
            last = pos = e;
        }
        if (last < text.size()) on_piece(last, text.size(), false);
    }

  private:
    std::unique_ptr<pcre2_code, PcreCodeDeleter> code_;
};

// GPT-2's pattern: what a ByteLevel pre-tokenizer with use_regex applies.
const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// SentencePiece's space, U+2581 "▁", in UTF-8.
constexpr std::string_view kMetaspace = "\xE2\x96\x81";

// The first ▁ in s at or after `from` (≥ 1) that follows another character than ▁: where a
// SentencePiece word begins inside s; npos when none does.
size_t next_word_start(std::string_view s, size_t from) {
    for (size_t p = s.find(kMetaspace, from); p != std::string_view::npos;
         p = s.find(kMetaspace, p + 1))
        if (p < kMetaspace.size() ||
            s.substr(p - kMetaspace.size(), kMetaspace.size()) != kMetaspace)
            return p;
    return std::string_view::npos;
}

// ----------------------------------------------------------------------------------------------
// tokenizer.json reading helpers

// `keep`: the parser callback, as json_parse_text takes it.
json json_read(const std::string& path, const json::parser_callback_t& keep = nullptr) {
    const std::optional<std::string> text = text_file_read(path);
    if (!text) throw InputError(str_cat(path, ": cannot open the file"));
    return json_parse_text(*text, path, "a Hugging Face tokenizer file", keep);
}

// A tokenizer.json's model.vocab and model.merges as the parser reads them, kept out of the JSON
// tree (they are most of the file: building the tree's 128K-150K map entries and 150K-280K merge
// strings was a third of a load); the tree keeps both as empty containers.
struct ModelLists {
    std::vector<std::pair<std::string, json>> vocab;  // (token, its id's value), in file order
    std::vector<json> merges;                         // each "left right" or [left, right]
    std::string vocab_not_scalar;  // the first token whose value was an object or array
};

json tokenizer_json_read(const std::string& path, ModelLists& lists) {
    using Event = json::parse_event_t;
    std::string key1, key2;  // the keys the parser is under at depths 1 and 2
    std::string token;       // a model.vocab entry's token until its value comes
    bool token_pending = false;
    auto in_model = [&](const char* what) { return key1 == "model" && key2 == what; };
    // a model.vocab value that is an object or an array never reaches the callback (its key was
    // left out): its token is still pending when the next key or the end of the vocab comes
    auto vocab_value_missed = [&] {
        if (token_pending && lists.vocab_not_scalar.empty()) lists.vocab_not_scalar = token;
        token_pending = false;
    };
    const json::parser_callback_t keep = [&](int depth, Event event, json& parsed) {
        if (event == Event::key) {
            if (depth == 1) {
                key1 = parsed.get_ref<const std::string&>();
                key2.clear();
            } else if (depth == 2) {
                key2 = parsed.get_ref<const std::string&>();
            } else if (depth == 3 && in_model("vocab")) {
                vocab_value_missed();
                token = std::move(parsed.get_ref<std::string&>());
                token_pending = true;
                return false;
            }
            return true;
        }
        if (depth == 2 && event == Event::object_end && in_model("vocab")) vocab_value_missed();
        if (depth != 3 ||
            (event != Event::value && event != Event::array_end && event != Event::object_end))
            return true;
        if (in_model("vocab") && event == Event::value) {
            lists.vocab.emplace_back(std::move(token), std::move(parsed));
            token_pending = false;
            return false;
        }
        if (in_model("merges")) {
            lists.merges.push_back(std::move(parsed));
            return false;
        }
        return true;
    };
    return json_read(path, keep);
}

// ----------------------------------------------------------------------------------------------
// The tokenizer

struct AddedToken {
    std::string content;
    int id;
    bool lstrip, rstrip;
};

// One pre-tokenizer step.
struct PreStep {
    enum Kind { split_isolated, split_removed, byte_level_regex, metaspace } kind;
    std::shared_ptr<Regex> regex;  // split_*, byte_level_regex
    bool prefix_space = false;     // byte_level_regex: add_prefix_space; metaspace: scheme != never
    bool metaspace_first_only = false;  // metaspace: prepend ▁ only to the text's first segment
};

class HfBpeTokenizer final : public Tokenizer {
  public:
    explicit HfBpeTokenizer(const std::string& path) : path_(path) {
        ModelLists lists;
        json j = tokenizer_json_read(path, lists);
        if (!j.is_object()) bad("", str_cat("expected a JSON object, found ", json_kind(j)));
        load_model(j, lists);
        load_normalizer(j.value("normalizer", json()));
        load_pre_tokenizer(j.value("pre_tokenizer", json()));
        load_decoder(j.value("decoder", json()));
        load_added_tokens(j);
        split_before_space_ = words_end_before_space();
        load_config(j.value("post_processor", json()));
    }

    std::vector<int> encode(std::string_view raw) const override {
        std::string text = utf8_is_valid(raw) ? std::string(raw) : utf8_repair(raw);
        std::vector<int> out;
        out.reserve(text.size() / 3 + 4);
        std::string_view t(text);
        size_t seg = 0, i = 0;
        while (i < t.size()) {
            const AddedToken* a = added_match(t, i);
            if (!a) {
                i++;
                continue;
            }
            size_t b = i, e = i + a->content.size();
            if (a->lstrip)
                while (b > seg && is_space_byte(t[b - 1])) b--;
            if (a->rstrip)
                while (e < t.size() && is_space_byte(t[e])) e++;
            encode_segment(t.substr(seg, b - seg), seg == 0, out);
            out.push_back(a->id);
            seg = i = e;
        }
        encode_segment(t.substr(seg), seg == 0, out);
        return out;
    }

    std::string decode(const std::vector<int>& tokens) const override {
        std::string out;
        for (size_t i = 0; i < tokens.size(); i++) {
            int t = tokens[i];
            if (t < 0 || t >= (int)decode_bytes_.size() || !has_id_[t])
                throw InputError(str_cat(path_, ": decode: token ", i, " is ", t,
                                         ", not an id of this vocabulary"));
            out += decode_bytes_[t];
        }
        if (strip_leading_space_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
        return out;
    }

    int vocab_size() const override { return (int)decode_bytes_.size(); }
    int eot_token() const override { return eot_; }
    int bos_token() const override { return bos_; }
    bool adds_bos() const override { return adds_bos_; }

  private:
    std::string path_;
    // model
    // looked up by string_view (merges and pre-tokenized words) without a copy
    struct ViewHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const noexcept {
            return std::hash<std::string_view>{}(s);
        }
    };
    std::unordered_map<std::string, int, ViewHash, std::equal_to<>> vocab_;
    std::unordered_map<uint64_t, std::pair<int, int>>
        merges_;  // (left id, right id) -> (rank, merged id)
    bool byte_fallback_ = false, ignore_merges_ = false, fuse_unk_ = false;
    int unk_id_ = -1;
    int byte_ids_[256];  // <0xNN> ids (byte fallback), -1 when absent
    // normalizer (applied in this order)
    bool nfc_ = false;
    std::string prepend_;                                       // Prepend
    std::vector<std::pair<std::string, std::string>> replace_;  // Replace (string patterns)
    // pre-tokenizer
    std::vector<PreStep> steps_;
    bool byte_level_ = false;  // pieces go through the byte-level alphabet
    // SentencePiece-style pieces (▁ for a space) may be cut before each ▁ that follows another
    // character: no merge can join across such a point (words_end_before_space; not with
    // ignore_merges, whose whole-word lookup would then see the cut words)
    bool split_before_space_ = false;
    // decoder
    std::vector<std::string> decode_bytes_;
    std::vector<bool> has_id_;
    bool strip_leading_space_ = false;
    // added tokens: by first byte, longest first
    std::vector<AddedToken> added_by_byte_[256];
    int eot_ = -1;
    int bos_ = -1;
    bool adds_bos_ = false;
    BpeWordCache cache_;  // words under 256 bytes

    [[noreturn]] void bad(const std::string& key, const std::string& what) const {
        throw InputError(str_cat(path_, key.empty() ? "" : ": ", key, ": ", what));
    }

    static bool is_space_byte(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

    static std::string type_of(const json& j) {
        if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return "";
        return j["type"].get<std::string>();
    }

    // ---- loading ----

    void load_model(const json& j, const ModelLists& lists) {
        if (!j.contains("model") || !j["model"].is_object())
            bad("model", "expected an object with the BPE model");
        const json& m = j["model"];
        std::string type = m.value("type", std::string("BPE"));
        if (type != "BPE")
            bad("model.type",
                str_cat("expected BPE, found ", type, " (only BPE models are supported)"));
        if (!m.contains("vocab") || !m["vocab"].is_object())
            bad("model.vocab", "expected an object of token -> id");
        if (!lists.vocab_not_scalar.empty())
            bad(str_cat("model.vocab[\"", lists.vocab_not_scalar, "\"]"),
                "expected a non-negative integer id, found an object or an array");
        vocab_.reserve(lists.vocab.size());
        for (const auto& [token, id] : lists.vocab) {
            if (!id.is_number_integer() || id.get<long long>() < 0 ||
                id.get<long long>() > (1 << 30))
                bad(str_cat("model.vocab[\"", token, "\"]"),
                    str_cat("expected a non-negative integer id, found ", json_kind(id)));
            vocab_.insert_or_assign(token, id.get<int>());  // a repeated token: the last wins
        }
        if (!m.contains("merges") || !m["merges"].is_array())
            bad("model.merges", "expected an array of merges");
        const std::vector<json>& merges = lists.merges;
        merges_.reserve(merges.size());
        std::string ab;  // the merged token's text
        for (size_t r = 0; r < merges.size(); r++) {
            const json& mj = merges[r];
            std::string_view a, b;
            if (mj.is_string()) {
                const std::string& s = mj.get_ref<const std::string&>();
                size_t sp = s.find(' ');
                if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                    bad(str_cat("model.merges[", r, "]"),
                        str_cat("expected \"left right\", found \"", s, "\""));
                a = std::string_view(s).substr(0, sp), b = std::string_view(s).substr(sp + 1);
            } else if (mj.is_array() && mj.size() == 2 && mj[0].is_string() && mj[1].is_string()) {
                a = mj[0].get_ref<const std::string&>(), b = mj[1].get_ref<const std::string&>();
            } else {
                bad(str_cat("model.merges[", r, "]"),
                    str_cat("expected \"left right\" or [left, right], found ", mj.dump()));
            }
            ab.assign(a).append(b);
            int ia = vocab_id(a), ib = vocab_id(b), im = vocab_id(ab);
            if (ia < 0 || ib < 0 || im < 0)
                bad(str_cat("model.merges[", r, "]"), str_cat("\"",
                                                              ia < 0   ? a
                                                              : ib < 0 ? b
                                                                       : std::string_view(ab),
                                                              "\" is not in model.vocab"));
            merges_.emplace(pair_key(ia, ib),
                            std::make_pair((int)r, im));  // the first (lowest rank) wins
        }
        byte_fallback_ = m.value("byte_fallback", false);
        ignore_merges_ = m.value("ignore_merges", false);
        fuse_unk_ = m.value("fuse_unk", false);
        if (m.contains("unk_token") && m["unk_token"].is_string())
            unk_id_ = vocab_id(m["unk_token"].get<std::string>());
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            byte_ids_[b] = vocab_id(name);
        }
        if (byte_fallback_ && std::count(byte_ids_, byte_ids_ + 256, -1) > 0)
            bad("model.byte_fallback",
                "true, but model.vocab lacks some of the <0x00>..<0xFF> tokens");
    }

    void load_normalizer(const json& n) {
        if (n.is_null()) return;
        std::string type = type_of(n);
        if (type == "Sequence") {
            if (!n.contains("normalizers") || !n["normalizers"].is_array())
                bad("normalizer.normalizers", "expected an array");
            for (const json& x : n["normalizers"]) load_normalizer(x);
        } else if (type == "NFC") {
            nfc_ = true;
        } else if (type == "Prepend" && n.contains("prepend") && n["prepend"].is_string()) {
            prepend_ = n["prepend"].get<std::string>();
        } else if (type == "Replace" && n.contains("pattern") && n["pattern"].contains("String") &&
                   n.contains("content")) {
            replace_.emplace_back(n["pattern"]["String"].get<std::string>(),
                                  n["content"].get<std::string>());
        } else {
            bad("normalizer",
                str_cat(
                    "unsupported normalizer ", n.dump().substr(0, 200),
                    " (supported: null, NFC, Prepend, Replace with a String pattern, Sequence)"));
        }
    }

    void load_pre_tokenizer(const json& p) {
        if (p.is_null()) return;
        std::string type = type_of(p);
        std::string where = str_cat(path_, ": pre_tokenizer");
        if (type == "Sequence") {
            if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array())
                bad("pre_tokenizer.pretokenizers", "expected an array");
            for (const json& x : p["pretokenizers"]) load_pre_tokenizer(x);
        } else if (type == "Split") {
            std::string behavior = p.value("behavior", std::string("Isolated"));
            if (p.value("invert", false) || (behavior != "Isolated" && behavior != "Removed"))
                bad("pre_tokenizer", str_cat("unsupported Split (behavior ", behavior, ", invert ",
                                             p.value("invert", false),
                                             "); supported: Isolated or Removed, invert false"));
            std::string pattern;
            if (p.contains("pattern") && p["pattern"].contains("Regex") &&
                p["pattern"]["Regex"].is_string())
                pattern = p["pattern"]["Regex"].get<std::string>();
            else if (p.contains("pattern") && p["pattern"].contains("String") &&
                     p["pattern"]["String"].is_string())
                pattern = "\\Q" + p["pattern"]["String"].get<std::string>() + "\\E";
            else
                bad("pre_tokenizer.pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
            PreStep s{behavior == "Isolated" ? PreStep::split_isolated : PreStep::split_removed,
                      std::make_shared<Regex>(pattern, where + ".pattern.Regex")};
            steps_.push_back(s);
        } else if (type == "ByteLevel") {
            byte_level_ = true;
            if (p.value("use_regex", true) || p.value("add_prefix_space", false)) {
                PreStep s{PreStep::byte_level_regex, nullptr};
                if (p.value("use_regex", true))
                    s.regex = std::make_shared<Regex>(kGpt2Pattern, where);
                s.prefix_space = p.value("add_prefix_space", false);
                steps_.push_back(s);
            }
        } else if (type == "Metaspace") {
            std::string scheme =
                p.value("prepend_scheme",
                        std::string(p.value("add_prefix_space", true) ? "always" : "never"));
            if (p.value("replacement", std::string(kMetaspace)) != kMetaspace)
                bad("pre_tokenizer.replacement",
                    "expected \"\xE2\x96\x81\" (the only Metaspace replacement supported)");
            PreStep s{PreStep::metaspace, nullptr};
            s.prefix_space = scheme != "never";
            s.metaspace_first_only = scheme == "first";
            if (p.value("split", true))
                bad("pre_tokenizer", "Metaspace with split: true is not supported yet");
            steps_.push_back(s);
        } else {
            bad("pre_tokenizer",
                str_cat("unsupported pre-tokenizer ", p.dump().substr(0, 200),
                        " (supported: null, Split, ByteLevel, Metaspace without split, Sequence)"));
        }
    }

    void load_decoder(const json& d) {
        // The decode table: byte-level tokens map their stand-ins back to bytes; SentencePiece
        // tokens turn ▁ into a space and <0xNN> into byte NN.
        int n = 0;
        for (auto& [tok, id] : vocab_) n = std::max(n, id + 1);
        decode_bytes_.assign(n, std::string());
        has_id_.assign(n, false);
        std::string type = type_of(d);
        bool byte_level_decoder = type == "ByteLevel";
        if (type == "Sequence" && d.contains("decoders") && d["decoders"].is_array())
            for (const json& x : d["decoders"]) {
                if (type_of(x) == "Strip" && x.value("start", 0) == 1) strip_leading_space_ = true;
                if (type_of(x) == "ByteLevel") byte_level_decoder = true;
            }
        if (type == "Metaspace" && d.value("prepend_scheme", std::string("always")) != "never")
            strip_leading_space_ = true;
        const ByteLevelMap& bl = byte_level_map();
        for (auto& [tok, id] : vocab_) {
            has_id_[id] = true;
            std::string& out = decode_bytes_[id];
            if (byte_level_decoder) {
                for (size_t i = 0; i < tok.size();) {
                    size_t len = std::max<size_t>(1, utf8_valid_len(tok, i));
                    uint32_t cp = 0;
                    std::string ch = tok.substr(i, len);
                    // decode the code point
                    unsigned char c = (unsigned char)ch[0];
                    cp = len == 1 ? c : len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
                    for (size_t k = 1; k < len; k++) cp = (cp << 6) | ((unsigned char)ch[k] & 0x3F);
                    auto it = bl.decode.find(cp);
                    if (it != bl.decode.end())
                        out += (char)it->second;
                    else
                        out += ch;
                    i += len;
                }
            } else if (byte_fallback_ && tok.size() == 6 && tok.rfind("<0x", 0) == 0 &&
                       tok[5] == '>') {
                out += (char)std::stoi(tok.substr(3, 2), nullptr, 16);
            } else {
                for (size_t i = 0; i < tok.size();) {
                    if (tok.compare(i, kMetaspace.size(), kMetaspace) == 0) {
                        out += ' ';
                        i += kMetaspace.size();
                    } else
                        out += tok[i++];
                }
            }
        }
    }

    void load_added_tokens(const json& j) {
        if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return;
        if (!j["added_tokens"].is_array()) bad("added_tokens", "expected an array");
        const json& at = j["added_tokens"];
        for (size_t i = 0; i < at.size(); i++) {
            const json& a = at[i];
            if (!a.is_object() || !a.contains("content") || !a["content"].is_string() ||
                a["content"].get<std::string>().empty() || !a.contains("id") ||
                !a["id"].is_number_integer() || a["id"].get<long long>() < 0 ||
                a["id"].get<long long>() > (1 << 30))
                bad(str_cat("added_tokens[", i, "]"),
                    str_cat(
                        "expected {\"id\": integer, \"content\": non-empty string, ...}, found ",
                        a.dump().substr(0, 200)));
            AddedToken t{a["content"].get<std::string>(), a["id"].get<int>(),
                         a.value("lstrip", false), a.value("rstrip", false)};
            if (t.id >= (int)decode_bytes_.size()) {
                decode_bytes_.resize(t.id + 1);
                has_id_.resize(t.id + 1, false);
            }
            decode_bytes_[t.id] = t.content;
            has_id_[t.id] = true;
            added_by_byte_[(unsigned char)t.content[0]].push_back(t);
        }
        for (auto& v : added_by_byte_)
            std::stable_sort(v.begin(), v.end(), [](const AddedToken& x, const AddedToken& y) {
                return x.content.size() > y.content.size();
            });
    }

    // tokenizer_config.json next to the file: eos_token and bos_token (a string, {"content": ...}
    // or null) and add_bos_token. Whether a BOS is added: add_bos_token when the config has it
    // (transformers' Llama tokenizers rebuild their post-processor from it), else whether the
    // post_processor's TemplateProcessing "single" template starts with a SpecialToken (which
    // is then the BOS).
    void load_config(const json& post_processor) {
        std::filesystem::path cfg =
            std::filesystem::path(path_).parent_path() / "tokenizer_config.json";
        std::string eos = "<|endoftext|>", bos;
        json c;
        if (std::filesystem::exists(cfg)) c = json_read(cfg.string());
        auto token_text = [&](const char* key, std::string& out) {
            if (!c.is_object() || !c.contains(key)) return;
            const json& e = c[key];
            if (e.is_string())
                out = e.get<std::string>();
            else if (e.is_object() && e.contains("content") && e["content"].is_string())
                out = e["content"].get<std::string>();
        };
        token_text("eos_token", eos);
        token_text("bos_token", bos);
        eot_ = token_id(eos);
        if (!bos.empty()) bos_ = token_id(bos);
        std::string template_bos = template_first_special(post_processor);
        if (c.is_object() && c.contains("add_bos_token") && c["add_bos_token"].is_boolean()) {
            adds_bos_ = c["add_bos_token"].get<bool>();
        } else if (!template_bos.empty()) {
            adds_bos_ = true;
            bos_ = token_id(template_bos);
        }
        if (adds_bos_ && bos_ < 0)
            throw InputError(str_cat(cfg.string(), ": add_bos_token is true but bos_token \"", bos,
                                     "\" is not a token of ", path_));
    }

    // The id of a special token's text (added tokens first, then the vocabulary); -1 if none.
    int token_id(const std::string& text) const {
        for (const AddedToken& a : added_by_byte_[text.empty() ? 0 : (unsigned char)text[0]])
            if (a.content == text) return a.id;
        return vocab_id(text);
    }

    // The SpecialToken that opens a TemplateProcessing "single" template ("" when none); a
    // Sequence of post-processors is searched for one.
    static std::string template_first_special(const json& p) {
        if (type_of(p) == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
            for (const json& x : p["processors"])
                if (std::string s = template_first_special(x); !s.empty()) return s;
            return "";
        }
        if (type_of(p) != "TemplateProcessing" || !p.contains("single") ||
            !p["single"].is_array() || p["single"].empty())
            return "";
        const json& first = p["single"][0];
        if (!first.is_object() || !first.contains("SpecialToken") ||
            !first["SpecialToken"].is_object())
            return "";
        const json& st = first["SpecialToken"];
        return st.contains("id") && st["id"].is_string() ? st["id"].get<std::string>() : "";
    }

    int vocab_id(std::string_view s) const {
        auto it = vocab_.find(s);
        return it == vocab_.end() ? -1 : it->second;
    }

    static uint64_t pair_key(int a, int b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

    // ---- encoding ----

    const AddedToken* added_match(std::string_view t, size_t i) const {
        for (const AddedToken& a : added_by_byte_[(unsigned char)t[i]])
            if (t.compare(i, a.content.size(), a.content) == 0) return &a;
        return nullptr;
    }

    // `first`: the segment starts the text (no added token before it).
    void encode_segment(std::string_view seg, bool first, std::vector<int>& out) const {
        if (seg.empty()) return;
        std::string text(seg);
        if (nfc_) text = unicode_nfc(text);
        if (!prepend_.empty()) text = prepend_ + text;
        for (const auto& [from, to] : replace_) {
            std::string r;
            for (size_t p = 0;;) {
                size_t q = text.find(from, p);
                if (q == std::string::npos) {
                    r.append(text, p);
                    break;
                }
                r.append(text, p, q - p);
                r += to;
                p = q + from.size();
            }
            text.swap(r);
        }
        std::vector<std::string> pieces{text};
        for (const PreStep& s : steps_) pieces = pre_step(s, pieces, first);
        std::string mapped;
        const ByteLevelMap& bl = byte_level_map();
        for (const std::string& piece : pieces) {
            if (piece.empty()) continue;
            if (byte_level_) {
                mapped.clear();
                for (unsigned char b : piece) mapped += bl.encode[b];
                bpe_cached(mapped, out);
            } else if (split_before_space_) {
                bpe_words(piece, out);
            } else {
                bpe_cached(piece, out);
            }
        }
    }

    // A SentencePiece BPE (Llama 2, Mistral, TinyLlama) sees a whole text, spaces as ▁, as one
    // piece: encoded as one word it is never cached, and long. When no token of the vocabulary has
    // a ▁ after another character (and ▁ is a token), no merge joins a character to a ▁ after it,
    // so the piece's merges are those of its words cut before each such ▁, one by one: the same
    // ids, and the words go through the cache. The ▁ word starts are tokens, so no unknown
    // character is fused across a cut.
    bool words_end_before_space() const {
        if (byte_level_ || ignore_merges_ || vocab_id(kMetaspace) < 0) return false;
        for (const auto& entry : vocab_)
            if (next_word_start(entry.first, 1) != std::string_view::npos) return false;
        return true;
    }

    // The piece's words one by one (a run of ▁ stays whole, with the word it starts).
    void bpe_words(const std::string& piece, std::vector<int>& out) const {
        const std::string_view v(piece);
        size_t start = 0;
        for (size_t p = next_word_start(v, 1); p != std::string_view::npos;
             p = next_word_start(v, p + 1)) {
            bpe_cached(std::string(v.substr(start, p - start)), out);
            start = p;
        }
        bpe_cached(std::string(v.substr(start)), out);
    }

    static std::vector<std::string> pre_step(const PreStep& s, const std::vector<std::string>& in,
                                             bool first) {
        std::vector<std::string> out;
        for (const std::string& p0 : in) {
            std::string p = p0;
            if (s.kind == PreStep::metaspace) {
                std::string r;
                for (char c : p) r += c == ' ' ? std::string(kMetaspace) : std::string(1, c);
                if (s.prefix_space && (first || !s.metaspace_first_only) &&
                    r.rfind(kMetaspace, 0) != 0)
                    r = std::string(kMetaspace) + r;
                out.push_back(r);
                continue;
            }
            if (s.kind == PreStep::byte_level_regex && s.prefix_space && !p.empty() && p[0] != ' ')
                p = " " + p;
            if (!s.regex) {
                out.push_back(p);
                continue;
            }
            s.regex->split(p, [&](size_t b, size_t e, bool matched) {
                if (matched || s.kind != PreStep::split_removed) out.push_back(p.substr(b, e - b));
            });
        }
        return out;
    }

    void bpe_cached(const std::string& word, std::vector<int>& out) const {
        if (word.size() >= 256) {
            std::vector<int> ids = bpe(word);
            out.insert(out.end(), ids.begin(), ids.end());
            return;
        }
        const std::vector<int>& ids =
            cache_.get(word, [this](const std::string& w) { return bpe(w); });
        out.insert(out.end(), ids.begin(), ids.end());
    }

    // The merge loop of huggingface/tokenizers (word.rs merge_all): a min-heap of (rank, position)
    // over adjacent pairs; a popped entry is skipped when either side has changed since.
    std::vector<int> bpe(const std::string& word) const {
        if (ignore_merges_) {
            int id = vocab_id(word);
            if (id >= 0) return {id};
        }
        struct Sym {
            int id;               // -1: a character missing from the vocabulary
            int prev, next;       // neighbours, -1 at the ends
            uint32_t start, len;  // bytes in `word`
        };
        std::vector<Sym> sym;
        for (size_t i = 0; i < word.size();) {
            size_t len = std::max<size_t>(1, utf8_valid_len(word, i));
            int n = (int)sym.size();
            sym.push_back({vocab_id(std::string_view(word).substr(i, len)), n - 1, n + 1,
                           (uint32_t)i, (uint32_t)len});
            i += len;
        }
        if (!sym.empty()) sym.back().next = -1;
        struct Cand {
            int rank, pos, left_id, right_id;
            bool operator>(const Cand& o) const {
                return rank != o.rank ? rank > o.rank : pos > o.pos;
            }
        };
        std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
        auto push = [&](int pos) {
            if (pos < 0 || sym[pos].next < 0) return;
            int a = sym[pos].id, b = sym[sym[pos].next].id;
            if (a < 0 || b < 0) return;
            auto it = merges_.find(pair_key(a, b));
            if (it != merges_.end()) heap.push({it->second.first, pos, a, b});
        };
        for (int i = 0; i + 1 < (int)sym.size(); i++) push(i);
        while (!heap.empty()) {
            Cand c = heap.top();
            heap.pop();
            Sym& l = sym[c.pos];
            if (l.len == 0 || l.next < 0 || l.id != c.left_id || sym[l.next].id != c.right_id)
                continue;  // stale
            Sym& r = sym[l.next];
            l.id = merges_.at(pair_key(c.left_id, c.right_id)).second;
            l.len += r.len;
            r.len = 0;
            l.next = r.next;
            if (r.next >= 0) sym[r.next].prev = c.pos;
            push(l.prev);
            push(c.pos);
        }
        std::vector<int> ids;
        for (const Sym& s : sym) {
            if (s.len == 0) continue;
            if (s.id >= 0) {
                ids.push_back(s.id);
                continue;
            }
            if (byte_fallback_) {
                for (uint32_t k = 0; k < s.len; k++)
                    ids.push_back(byte_ids_[(unsigned char)word[s.start + k]]);
            } else if (unk_id_ >= 0) {
                if (!(fuse_unk_ && !ids.empty() && ids.back() == unk_id_)) ids.push_back(unk_id_);
            } else {
                throw InputError(str_cat(path_, ": encode: \"", word.substr(s.start, s.len),
                                         "\" is not in the vocabulary and the model has neither "
                                         "byte_fallback nor unk_token"));
            }
        }
        return ids;
    }
};

}  // namespace

std::string tokenizer_hf_file(const std::string& path) {
    std::filesystem::path p(path);
    if (std::filesystem::is_directory(p)) p /= "tokenizer.json";
    return p.string();
}

std::unique_ptr<Tokenizer> tokenizer_hf(const std::string& path) {
    std::string file = tokenizer_hf_file(path);
    if (!std::filesystem::exists(file))
        throw InputError(str_cat(
            file, ": not found (expected a Hugging Face tokenizer.json, or a folder holding one)"));
    return std::make_unique<HfBpeTokenizer>(file);
}

}  // namespace tessera
