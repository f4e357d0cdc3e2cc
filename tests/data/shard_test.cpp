// Token shards (write/read round-trip and each rejection) and the deterministic token sampler.
#include "engine/data/shard.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>

#include "engine/core/error.h"
#include "engine/data/token_sampler.h"
#include "tests/data/data_test_util.h"

using namespace tessera;
using tessera::test::TempDir;

namespace {

// Expects shard_read(path) and mapping it (TokenShard) each to throw one InputError whose text
// contains every `needles` entry.
void expect_read_error(const std::string& path, std::vector<std::string> needles) {
    needles.push_back(path);
    for (const char* how : {"shard_read", "TokenShard"}) {
        try {
            if (how[0] == 's')
                shard_read(path);
            else
                TokenShard mapped(path);
            ADD_FAILURE() << how << ": expected InputError for " << path;
        } catch (const InputError& e) {
            std::string msg = e.what();
            for (const std::string& n : needles)
                EXPECT_NE(msg.find(n), std::string::npos) << how << ": " << msg;
        }
    }
}

std::vector<char> file_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

void file_put(const std::string& path, const std::vector<char>& b) {
    std::ofstream(path, std::ios::binary).write(b.data(), (std::streamsize)b.size());
}

}  // namespace

TEST(Shard, WriteReadRoundTrip) {
    TempDir tmp;
    std::vector<uint32_t> tokens;
    for (int i = 0; i < 5000; i++) tokens.push_back((uint32_t)(i * 7919 % 65536));
    std::string path = tmp.file("sub/dir/train.bin");  // parent folders are created
    shard_write(path, tokens);
    EXPECT_EQ(shard_read(path), tokens);
    EXPECT_EQ(std::filesystem::file_size(path), 1024u + 2u * tokens.size());
    std::vector<char> b = file_bytes(path);
    int32_t header[3];
    std::memcpy(header, b.data(), sizeof(header));
    EXPECT_EQ(header[0], 20240520);
    EXPECT_EQ(header[1], 1);
    EXPECT_EQ(header[2], 5000);
    // No temp file is left behind.
    int files = 0;
    for (auto& e : std::filesystem::directory_iterator(tmp.path() / "sub/dir"))
        files += e.is_regular_file();
    EXPECT_EQ(files, 1);
    // Empty shard and overwrite.
    shard_write(path, {});
    EXPECT_TRUE(shard_read(path).empty());
}

// Ids past uint16 (Llama 3's 128256, Qwen's 151936 rows) write the uint32 variant (version 2),
// read back as they were; a file of such ids with a bad size is refused like a version-1 one.
TEST(Shard, WideIdsWriteVersionTwo) {
    TempDir tmp;
    std::vector<uint32_t> tokens{0, 65535, 65536, 151935, 7};
    std::string path = tmp.file("wide.bin");
    shard_write(path, tokens);
    EXPECT_EQ(shard_read(path), tokens);
    EXPECT_EQ(std::filesystem::file_size(path), 1024u + 4u * tokens.size());
    std::vector<char> b = file_bytes(path);
    int32_t header[3];
    std::memcpy(header, b.data(), sizeof(header));
    EXPECT_EQ(header[1], 2);
    EXPECT_EQ(header[2], 5);
    b.pop_back();
    file_put(path, b);
    expect_read_error(path, {"truncated", "5 tokens", "1044", "1043"});
}

// A range of either version reads the same tokens as the whole shard; a range past the end is
// an InputError naming the file.
TEST(Shard, ReadRangeOfBothVersions) {
    TempDir tmp;
    for (uint32_t top : {1000u, 100000u}) {
        std::vector<uint32_t> ids;
        for (uint32_t i = 0; i < 500; i++) ids.push_back((i * 7919u) % top);
        std::string p = tmp.file("r.bin");
        tessera::shard_write(p, ids);
        EXPECT_EQ(tessera::shard_read_range(p, 0, 500), ids);
        EXPECT_EQ(tessera::shard_read_range(p, 123, 45),
                  std::vector<uint32_t>(ids.begin() + 123, ids.begin() + 168));
        EXPECT_TRUE(tessera::shard_read_range(p, 500, 0).empty());
        try {
            tessera::shard_read_range(p, 490, 11);
            ADD_FAILURE() << "expected an InputError";
        } catch (const tessera::InputError& e) {
            EXPECT_NE(std::string(e.what()).find(
                          p + ": tokens [490, 501) requested, the shard holds 500"),
                      std::string::npos)
                << e.what();
        }
    }
}

// A mapped shard (what a training rank reads) holds the ids shard_read returns, for both
// versions, and the samplers read the same windows from it as from those ids.
TEST(Shard, MappedShardReadsWhatShardReadReads) {
    TempDir tmp;
    for (uint32_t top : {1000u, 100000u}) {
        std::vector<uint32_t> ids;
        for (uint32_t i = 0; i < 5000; i++) ids.push_back((i * 7919u) % top);
        const std::string p = tmp.file(std::to_string(top) + ".bin");
        shard_write(p, ids);
        TokenShard mapped(p);
        const TokenView v = mapped.tokens();
        EXPECT_EQ(v.width, top > 0xFFFF ? 4 : 2);
        ASSERT_EQ(mapped.size(), 5000);
        std::vector<uint32_t> got;
        for (int64_t i = 0; i < v.size; ++i) got.push_back(v[i]);
        EXPECT_EQ(got, shard_read(p));
        EXPECT_EQ(v.max(), *std::max_element(ids.begin(), ids.end()));
        const int n = 8, T = 32;
        std::vector<int32_t> a_in(n * T), a_tg(n * T), b_in(n * T), b_tg(n * T);
        sample_token_batch(v, 5, 3, 0, n, T, a_in.data(), a_tg.data());
        sample_token_batch(ids, 5, 3, 0, n, T, b_in.data(), b_tg.data());
        EXPECT_EQ(a_in, b_in);
        EXPECT_EQ(a_tg, b_tg);
        epoch_token_batch(v, 5, 3, 0, n, 16, T, a_in.data(), a_tg.data());
        epoch_token_batch(ids, 5, 3, 0, n, 16, T, b_in.data(), b_tg.data());
        EXPECT_EQ(a_in, b_in);
        // a copy shares the mapping and outlives the shard it was copied from
        std::optional<TokenShard> copy;
        {
            const TokenShard first(p);
            copy = first;
        }
        EXPECT_EQ(copy->tokens()[4999], ids[4999]);
    }
    shard_write(tmp.file("empty.bin"), {});
    TokenShard empty(tmp.file("empty.bin"));
    EXPECT_EQ(empty.size(), 0);
    EXPECT_EQ(empty.tokens().max(), 0u);
}

TEST(Shard, RejectsMissingFile) {
    expect_read_error("/nonexistent/x.bin", {"not found"});
}

TEST(Shard, RejectsBadMagic) {
    TempDir tmp;
    std::string path = tmp.file("a.bin");
    shard_write(path, {1, 2, 3});
    std::vector<char> b = file_bytes(path);
    int32_t bad = 12345;
    std::memcpy(b.data(), &bad, 4);
    file_put(path, b);
    expect_read_error(path, {"magic", "20240520", "12345"});
}

TEST(Shard, RejectsBadVersion) {
    TempDir tmp;
    std::string path = tmp.file("a.bin");
    shard_write(path, {1, 2, 3});
    std::vector<char> b = file_bytes(path);
    int32_t v = 7;
    std::memcpy(b.data() + 4, &v, 4);
    file_put(path, b);
    expect_read_error(path, {"version", "7"});
}

TEST(Shard, RejectsTruncatedFiles) {
    TempDir tmp;
    std::string path = tmp.file("a.bin");
    shard_write(path, {1, 2, 3, 4});
    std::vector<char> b = file_bytes(path);
    b.pop_back();
    file_put(path, b);
    expect_read_error(path, {"truncated", "4 tokens", "1032", "1031"});
    b.resize(100);  // not even a header
    file_put(path, b);
    expect_read_error(path, {"truncated", "1024", "100"});
}

TEST(TokenSampler, WindowsAreShiftedTargets) {
    std::vector<uint32_t> tokens(1000);
    for (size_t i = 0; i < tokens.size(); i++) tokens[i] = (uint32_t)i;
    const int n = 16, T = 32;
    std::vector<int32_t> in(n * T), tg(n * T);
    sample_token_batch(tokens, 1234, 0, 0, n, T, in.data(), tg.data());
    std::set<int32_t> starts;
    for (int r = 0; r < n; r++) {
        int32_t s = in[r * T];
        EXPECT_GE(s, 0);
        EXPECT_LE(s, 1000 - T - 1);
        starts.insert(s);
        for (int t = 0; t < T; t++) {
            EXPECT_EQ(in[r * T + t], s + t);
            EXPECT_EQ(tg[r * T + t], s + t + 1);
        }
    }
    EXPECT_GT(starts.size(), 12u);  // the starts are spread, not constant
}

TEST(TokenSampler, DependsOnlyOnSeedStepAndGlobalIndex) {
    std::vector<uint32_t> tokens(50000);
    for (size_t i = 0; i < tokens.size(); i++)
        tokens[i] = (uint32_t)(uint16_t)((i * 2654435761u) >> 7);
    const int n = 24, T = 64;
    std::vector<int32_t> whole_in(n * T), whole_tg(n * T);
    sample_token_batch(tokens, 42, 7, 0, n, T, whole_in.data(), whole_tg.data());
    // Split the same 24 samples over calls of 1, 5, 8 and 10 (as ranks / micro-batches would).
    std::vector<int32_t> in(n * T), tg(n * T);
    int splits[] = {1, 5, 8, 10};
    int first = 0;
    for (int s : splits) {
        sample_token_batch(tokens, 42, 7, first, s, T, in.data() + first * T,
                           tg.data() + first * T);
        first += s;
    }
    EXPECT_EQ(in, whole_in);
    EXPECT_EQ(tg, whole_tg);
    // A different step or seed gives different windows.
    sample_token_batch(tokens, 42, 8, 0, n, T, in.data(), tg.data());
    EXPECT_NE(in, whole_in);
    sample_token_batch(tokens, 43, 7, 0, n, T, in.data(), tg.data());
    EXPECT_NE(in, whole_in);
    // The documented rule (docs/data.md), pinned with values from an independent Python
    // evaluation of splitmix64 so that a change to the rule is noticed.
    EXPECT_EQ(token_sampler_start(42, 7, 0, 50000, T), 16725);
    EXPECT_EQ(token_sampler_start(42, 7, 1, 50000, T), 10970);
    EXPECT_EQ(token_sampler_start(42, 7, 2, 50000, T), 12026);
    EXPECT_EQ(whole_in[1 * T], tokens[10970]);
}

TEST(TokenSampler, ShortShardIsAnInputError) {
    std::vector<uint32_t> tokens(64);
    std::vector<int32_t> in(64), tg(64);
    EXPECT_THROW(sample_token_batch(tokens, 1, 0, 0, 1, 64, in.data(), tg.data()), InputError);
    EXPECT_NO_THROW(sample_token_batch(tokens, 1, 0, 0, 1, 63, in.data(), tg.data()));
    EXPECT_EQ(in[0], 0);  // only one window fits
}
