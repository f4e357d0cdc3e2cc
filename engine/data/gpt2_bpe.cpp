// GPT-2 byte-level BPE, written to reproduce the npm package gpt-3-encoder (Encoder.js) exactly:
// the same pre-tokenization regex (matched by hand on code points, with node's Unicode tables
// from unicode_tables.h), the same byte-to-unicode map, the same merge loop (including the
// JavaScript detail that a pair's rank is looked up by the key "first,second"), and no special
// handling of "<|endoftext|>" inside text. Known difference: invalid UTF-8 in the input is kept
// byte for byte here, while the JS reference (which only sees valid strings) would see U+FFFD.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "engine/core/error.h"
#include "engine/core/json_text.h"
#include "engine/data/byte_level.h"
#include "engine/data/cache.h"
#include "engine/data/tokenizer.h"
#include "engine/data/unicode_tables.h"
#include "engine/data/word_cache.h"

namespace tessera {

// ----------------------------------------------------------------------------------------------
// UTF-8 and character classes

namespace {

struct CodePoint {
    uint32_t cp;     // U+FFFD for an invalid byte
    uint32_t start;  // byte offset in the text
    uint32_t len;    // bytes
};

// Decodes UTF-8; an invalid or truncated sequence yields U+FFFD for its first byte only.
std::vector<CodePoint> utf8_decode(std::string_view s) {
    std::vector<CodePoint> out;
    out.reserve(s.size());
    size_t i = 0, n = s.size();
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp = 0xFFFD, len = 1, need = 0, min = 0;
        if (c < 0x80) {
            cp = c;
        } else if ((c & 0xE0) == 0xC0) {
            cp = c & 0x1F;
            need = 1;
            min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            cp = c & 0x0F;
            need = 2;
            min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            cp = c & 0x07;
            need = 3;
            min = 0x10000;
        } else {
            cp = 0xFFFD;
        }
        if (need) {
            bool ok = i + need < n;  // the continuation bytes are inside the text
            for (uint32_t k = 1; ok && k <= need; k++) {
                unsigned char d = (unsigned char)s[i + k];
                if ((d & 0xC0) != 0x80)
                    ok = false;
                else
                    cp = (cp << 6) | (d & 0x3F);
            }
            if (ok && (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
            if (ok)
                len = need + 1;
            else
                cp = 0xFFFD;
        }
        out.push_back({cp, (uint32_t)i, len});
        i += len;
    }
    return out;
}

template <size_t N>
bool in_ranges(const unicode_tables::CodeRange (&ranges)[N], uint32_t cp) {
    // upper_bound on lo, then check the previous range.
    size_t lo = 0, hi = N;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ranges[mid].lo <= cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && cp <= ranges[lo - 1].hi;
}

enum class CharClass { letter, number, space, other };

CharClass char_class(uint32_t cp) {
    if (cp < 0x80) {  // fast path for ASCII
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return CharClass::letter;
        if (cp >= '0' && cp <= '9') return CharClass::number;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::space;
        return CharClass::other;
    }
    if (in_ranges(unicode_tables::kLetterRanges, cp)) return CharClass::letter;
    if (in_ranges(unicode_tables::kNumberRanges, cp)) return CharClass::number;
    if (in_ranges(unicode_tables::kSpaceRanges, cp)) return CharClass::space;
    return CharClass::other;
}

}  // namespace

// ----------------------------------------------------------------------------------------------
// Pre-tokenization: the regex alternatives, tried in order at each position

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
    std::vector<CodePoint> cps = utf8_decode(text);
    size_t n = cps.size();
    std::vector<CharClass> cls(n);
    for (size_t i = 0; i < n; i++) cls[i] = char_class(cps[i].cp);

    std::vector<std::string_view> pieces;
    size_t i = 0;
    while (i < n) {
        size_t end = i;  // one past the last code point of the match
        uint32_t c = cps[i].cp;
        // 's|'t|'re|'ve|'m|'ll|'d  (lower case only, like the regex)
        if (c == '\'' && i + 1 < n) {
            uint32_t a = cps[i + 1].cp, b = i + 2 < n ? cps[i + 2].cp : 0;
            if (a == 's' || a == 't' || a == 'm' || a == 'd')
                end = i + 2;
            else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                end = i + 3;
        }
        // ' ?\p{L}+' then ' ?\p{N}+' then ' ?[^\s\p{L}\p{N}]+'
        if (end == i) {
            size_t j = (c == ' ' && i + 1 < n) ? i + 1 : i;
            CharClass k = cls[j];
            if (j == i + 1 && k == CharClass::space)
                j = i;  // the space alone: no class run follows
            k = cls[j];
            if (k != CharClass::space) {
                size_t e = j;
                while (e < n && cls[e] == k) e++;
                end = e;
            }
        }
        // '\s+(?!\S)' then '\s+'
        if (end == i) {
            size_t e = i;
            while (e < n && cls[e] == CharClass::space) e++;
            size_t run = e - i;
            end = (e == n || run == 1) ? e : e - 1;
        }
        size_t b0 = cps[i].start, b1 = end < n ? cps[end].start : text.size();
        pieces.push_back(text.substr(b0, b1 - b0));
        i = end;
    }
    return pieces;
}

// ----------------------------------------------------------------------------------------------
// The BPE tokenizer

namespace {

std::string data_file_text(const std::string& path, const char* what) {
    std::optional<std::string> text = text_file_read(path);
    if (!text)
        throw InputError(str_cat(what, " file not found: ", path, " (", data_fill_hint(), ")"));
    return std::move(*text);
}

class Gpt2Tokenizer final : public Tokenizer {
  public:
    Gpt2Tokenizer(const std::string& encoder_json_path, const std::string& vocab_bpe_path) {
        load_encoder(encoder_json_path);
        load_merges(vocab_bpe_path);
    }

    std::vector<int> encode(std::string_view text) const override {
        std::vector<int> out;
        out.reserve(text.size() / 3 + 4);
        std::string mapped;
        for (std::string_view piece : gpt2_pretokenize(text)) {
            mapped.clear();
            for (unsigned char b : piece) mapped += byte_level_map().encode[b];
            const std::vector<int>& ids = bpe_cached(mapped);
            out.insert(out.end(), ids.begin(), ids.end());
        }
        return out;
    }

    std::string decode(const std::vector<int>& tokens) const override {
        std::string out;
        for (size_t i = 0; i < tokens.size(); i++) {
            int t = tokens[i];
            if (t < 0 || t >= (int)decoder_bytes_.size())
                throw InputError(str_cat("gpt2 decode: token ", i, " is ", t,
                                         ", expected an id in [0, ", decoder_bytes_.size(), ")"));
            out += decoder_bytes_[t];
        }
        return out;
    }

    int vocab_size() const override { return (int)decoder_bytes_.size(); }
    int eot_token() const override { return eot_; }

  private:
    std::unordered_map<std::string, int> encoder_;  // BPE token (stand-in chars) -> id
    std::vector<std::string> decoder_bytes_;        // id -> raw bytes
    std::unordered_map<std::string, int> ranks_;    // "first,second" -> merge rank
    int eot_ = -1;
    BpeWordCache cache_;

    void load_encoder(const std::string& path) {
        const nlohmann::json j = json_parse_text(data_file_text(path, "GPT-2 encoder.json"), path,
                                                 "a JSON object of token -> id");
        if (!j.is_object())
            throw InputError(
                str_cat(path, ": expected a JSON object of token -> id, found ", json_kind(j)));
        decoder_bytes_.assign(j.size(), std::string());
        std::vector<bool> seen(j.size(), false);
        for (auto it = j.begin(); it != j.end(); ++it) {
            if (!it.value().is_number_integer())
                throw InputError(str_cat(path, ": key \"", it.key(),
                                         "\": expected an integer id, found ",
                                         json_kind(it.value())));
            long long id = it.value().get<long long>();
            if (id < 0 || id >= (long long)j.size() || seen[id])
                throw InputError(str_cat(path, ": key \"", it.key(),
                                         "\": expected a unique id in [0, ", j.size(), "), found ",
                                         id));
            seen[id] = true;
            encoder_[it.key()] = (int)id;
            decoder_bytes_[id] = token_to_bytes(path, it.key());
        }
        auto eot = encoder_.find("<|endoftext|>");
        eot_ = eot == encoder_.end() ? -1 : eot->second;
    }

    // A vocabulary entry is a string of stand-in characters; map each back to its byte.
    std::string token_to_bytes(const std::string& path, const std::string& token) const {
        if (token == "<|endoftext|>") return token;
        std::string bytes;
        for (const CodePoint& c : utf8_decode(token)) {
            auto it = byte_level_map().decode.find(c.cp);
            if (it == byte_level_map().decode.end())
                throw InputError(str_cat(path, ": key \"", token,
                                         "\": expected only byte stand-in "
                                         "characters, found U+",
                                         std::hex, c.cp));
            bytes += (char)it->second;
        }
        return bytes;
    }

    // Like Encoder.js: lines[1 : len-1] of the file split on '\n' (the version line and the
    // text after the last newline are dropped), each split on whitespace into a pair.
    void load_merges(const std::string& path) {
        std::string text = data_file_text(path, "GPT-2 vocab.bpe");
        std::vector<std::string_view> lines;
        std::string_view rest(text);
        for (size_t p; (p = rest.find('\n')) != std::string_view::npos; rest.remove_prefix(p + 1))
            lines.push_back(rest.substr(0, p));
        lines.push_back(rest);
        if (lines.size() < 2 || lines[0].rfind("#version", 0) != 0)
            throw InputError(
                str_cat(path, ":1: expected a \"#version\" header line of a GPT-2 vocab.bpe"));
        for (size_t ln = 1; ln + 1 < lines.size(); ln++) {
            std::istringstream is{std::string(lines[ln])};
            std::string a, b, extra;
            if (!(is >> a >> b) || (is >> extra))
                throw InputError(str_cat(path, ":", ln + 1,
                                         ": expected a merge \"first second\", found \"", lines[ln],
                                         "\""));
            ranks_[a + "," + b] = (int)(ln - 1);  // later duplicates win, as in the JS object
        }
    }

    int rank_of(const std::string& a, const std::string& b) const {
        std::string key;
        key.reserve(a.size() + b.size() + 1);
        key += a;
        key += ',';
        key += b;
        auto it = ranks_.find(key);
        return it == ranks_.end() ? std::numeric_limits<int>::max() : it->second;
    }

    const std::vector<int>& bpe_cached(const std::string& token) const {
        return cache_.get(token, [this](const std::string& t) { return bpe(t); });
    }

    // The merge loop of Encoder.js: repeatedly merge every occurrence (left to right) of the
    // lowest-ranked adjacent pair; on equal ranks the last pair in the word wins.
    std::vector<int> bpe(const std::string& token) const {
        std::vector<std::string> word;
        for (const CodePoint& c : utf8_decode(token)) word.push_back(token.substr(c.start, c.len));
        while (word.size() > 1) {
            int best = std::numeric_limits<int>::max();
            size_t best_i = 0;
            for (size_t i = 0; i + 1 < word.size(); i++) {
                int r = rank_of(word[i], word[i + 1]);
                if (r != std::numeric_limits<int>::max() && r <= best) {
                    best = r;
                    best_i = i;
                }
            }
            if (best == std::numeric_limits<int>::max()) break;
            std::string first = word[best_i], second = word[best_i + 1];
            std::vector<std::string> merged;
            merged.reserve(word.size());
            for (size_t i = 0; i < word.size();) {
                if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
                    merged.push_back(first + second);
                    i += 2;
                } else {
                    merged.push_back(word[i]);
                    i += 1;
                }
            }
            word.swap(merged);
        }
        std::vector<int> ids;
        ids.reserve(word.size());
        for (const std::string& w : word) {
            auto it = encoder_.find(w);
            TS_CHECK(it != encoder_.end(), "gpt2 BPE produced a token missing from encoder.json");
            ids.push_back(it->second);
        }
        return ids;
    }
};

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_gpt2(const std::string& encoder_json_path,
                                          const std::string& vocab_bpe_path) {
    return std::make_unique<Gpt2Tokenizer>(encoder_json_path, vocab_bpe_path);
}

}  // namespace tessera
