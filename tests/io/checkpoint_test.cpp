// Checkpoints: save/load round trip, manifest contents, rotation, corruption detection (size and
// crc32), and recovery from a save that crashed half-way.
#include "engine/io/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "tests/io/io_test_util.h"

using namespace tessera;
using tessera::test::expect_input_error;
using tessera::test::read_bytes;
using tessera::test::TempDir;
using tessera::test::write_bytes;
namespace fs = std::filesystem;

// A tiny "model + AdamW" state: params (fp32), moments m and v.
struct FakeTrainState {
    std::vector<float> wte = std::vector<float>(12), ln = std::vector<float>(3);
    std::vector<float> m = std::vector<float>(15), v = std::vector<float>(15);
    explicit FakeTrainState(float seed) {
        for (size_t i = 0; i < wte.size(); ++i) wte[i] = seed + 0.5f * i;
        for (size_t i = 0; i < ln.size(); ++i) ln[i] = -seed * i;
        for (size_t i = 0; i < m.size(); ++i) m[i] = 0.01f * i + seed, v[i] = 1e-4f * i;
    }
    std::vector<CheckpointFile> files() const {
        return {{"model",
                 {{"wte", DType::f32, {4, 3}, wte.data()}, {"ln.w", DType::f32, {3}, ln.data()}}},
                {"optim", {{"m", DType::f32, {15}, m.data()}, {"v", DType::f32, {15}, v.data()}}}};
    }
};

static nlohmann::json state_at(int64_t step) {
    return {{"step", step},
            {"data", {{"shard", 2}, {"offset", 4096 * step}}},
            {"rng", {1, 2, 3, 4}},
            {"config", "model:\n  d: 64\n"}};
}

static std::vector<std::string> list_dir(const std::string& dir) {
    std::vector<std::string> out;
    for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

TEST(Checkpoint, SaveLoadRoundTrip) {
    TempDir root;
    FakeTrainState s(1.f);
    std::string dir = checkpoint_save(root.path().string(), 1200, s.files(), state_at(1200), 3);
    EXPECT_EQ(dir, root / "step_00001200");
    EXPECT_EQ(list_dir(root.path().string()),
              (std::vector<std::string>{"latest", "step_00001200"}));
    EXPECT_EQ(list_dir(dir), (std::vector<std::string>{"manifest.json", "model.safetensors",
                                                       "optim.safetensors"}));
    EXPECT_EQ(read_bytes(root / "latest"), "step_00001200\n");

    nlohmann::json m = nlohmann::json::parse(read_bytes(dir + "/manifest.json"));
    EXPECT_EQ(m["format"], "tessera-checkpoint");
    EXPECT_EQ(m["version"], 1);
    EXPECT_EQ(m["step"], 1200);
    ASSERT_EQ(m["files"].size(), 2u);
    EXPECT_EQ(m["files"][0]["name"], "model.safetensors");
    EXPECT_EQ(m["files"][0]["bytes"].get<uint64_t>(), fs::file_size(dir + "/model.safetensors"));
    std::string model_bytes = read_bytes(dir + "/model.safetensors");
    EXPECT_EQ(m["files"][0]["crc32"].get<uint32_t>(),
              io_crc32(model_bytes.data(), model_bytes.size()));

    for (const std::string& path :
         {root.path().string(), dir}) {  // from ROOT and from the step dir
        Checkpoint ck = checkpoint_load(path);
        EXPECT_EQ(ck.dir, dir);
        EXPECT_EQ(ck.step, 1200);
        EXPECT_EQ(ck.state, state_at(1200));
        ASSERT_EQ(ck.files.size(), 2u);
        FakeTrainState r(0.f);
        ck.files.at("model").read_f32("wte", {4, 3}, r.wte.data());
        ck.files.at("model").read_f32("ln.w", {3}, r.ln.data());
        ck.files.at("optim").read_f32("m", {15}, r.m.data());
        ck.files.at("optim").read_f32("v", {15}, r.v.data());
        EXPECT_EQ(r.wte, s.wte);
        EXPECT_EQ(r.ln, s.ln);
        EXPECT_EQ(r.m, s.m);
        EXPECT_EQ(r.v, s.v);
        EXPECT_EQ(ck.files.at("model").metadata().at("format"), "pt");
    }
}

TEST(Checkpoint, LatestIsNoneForEmptyOrMissingRoot) {
    TempDir root;
    EXPECT_FALSE(checkpoint_latest(root.path().string()).has_value());
    EXPECT_FALSE(checkpoint_latest(root / "nope").has_value());
    expect_input_error([&] { checkpoint_load(root.path().string()); },
                       {"checkpoint " + root.path().string(), "no complete checkpoint"});
    expect_input_error([&] { checkpoint_load(root / "nope"); },
                       {root / "nope", "no such file or directory"});
}

TEST(Checkpoint, RotationKeepsExactlyKeepNewest) {
    TempDir root;
    FakeTrainState s(2.f);
    for (int64_t step = 100; step <= 700; step += 100)
        checkpoint_save(root.path().string(), step, s.files(), state_at(step), 3);
    EXPECT_EQ(
        list_dir(root.path().string()),
        (std::vector<std::string>{"latest", "step_00000500", "step_00000600", "step_00000700"}));
    EXPECT_EQ(checkpoint_latest(root.path().string()), root / "step_00000700");
    EXPECT_EQ(checkpoint_load(root.path().string()).step, 700);

    checkpoint_save(root.path().string(), 800, s.files(), state_at(800), 1);
    EXPECT_EQ(list_dir(root.path().string()),
              (std::vector<std::string>{"latest", "step_00000800"}));

    // keep <= 0 keeps everything
    checkpoint_save(root.path().string(), 900, s.files(), state_at(900), 0);
    EXPECT_EQ(list_dir(root.path().string()),
              (std::vector<std::string>{"latest", "step_00000800", "step_00000900"}));
}

// Two runs set aside in the same second get two folders; each is a checkpoint root of its own
// (its `latest` went with it) and the root is left empty of checkpoints; temp dirs stay.
TEST(Checkpoint, SetAsideMovesEveryCompleteCheckpointIntoAFolderOfItsOwn) {
    TempDir root;
    EXPECT_EQ(checkpoint_set_aside(root.path().string()).count, 0) << "nothing to move";
    EXPECT_FALSE(fs::exists(root / "earlier"));
    FakeTrainState s(3.f);
    for (int64_t step : {10, 20})
        checkpoint_save(root.path().string(), step, s.files(), state_at(step), 0);
    fs::create_directory(root / ".tmp-step_00000030.1");
    CheckpointsSetAside a = checkpoint_set_aside(root.path().string());
    EXPECT_EQ(a.count, 2);
    EXPECT_EQ(a.first_step, 10);
    EXPECT_EQ(a.last_step, 20);
    EXPECT_EQ(fs::path(a.dir).parent_path(), root / "earlier");
    EXPECT_EQ(list_dir(a.dir),
              (std::vector<std::string>{"latest", "step_00000010", "step_00000020"}));
    EXPECT_EQ(list_dir(root.path().string()),
              (std::vector<std::string>{".tmp-step_00000030.1", "earlier"}));
    EXPECT_FALSE(checkpoint_latest(root.path().string()));
    EXPECT_EQ(checkpoint_load(a.dir).step, 20);

    checkpoint_save(root.path().string(), 5, s.files(), state_at(5), 0);
    CheckpointsSetAside b = checkpoint_set_aside(root.path().string());
    EXPECT_EQ(b.count, 1);
    EXPECT_NE(b.dir, a.dir);
    EXPECT_EQ(checkpoint_load(b.dir).step, 5);
    EXPECT_EQ(checkpoint_load(a.dir).step, 20);
}

TEST(Checkpoint, ResavingAStepReplacesIt) {
    TempDir root;
    checkpoint_save(root.path().string(), 5, FakeTrainState(1.f).files(), state_at(5), 2);
    FakeTrainState s2(9.f);
    checkpoint_save(root.path().string(), 5, s2.files(), {{"again", true}}, 2);
    EXPECT_EQ(list_dir(root.path().string()),
              (std::vector<std::string>{"latest", "step_00000005"}));
    Checkpoint ck = checkpoint_load(root.path().string());
    EXPECT_EQ(ck.state, (nlohmann::json{{"again", true}}));
    std::vector<float> wte(12);
    ck.files.at("model").read_f32("wte", {4, 3}, wte.data());
    EXPECT_EQ(wte, s2.wte);
}

TEST(Checkpoint, TruncatedFileIsRefusedWithExpectedAndFoundSize) {
    TempDir root;
    std::string dir =
        checkpoint_save(root.path().string(), 3, FakeTrainState(1.f).files(), state_at(3), 2);
    std::string path = dir + "/model.safetensors";
    std::string bytes = read_bytes(path);
    write_bytes(path, bytes.substr(0, bytes.size() - 10));
    expect_input_error(
        [&] { checkpoint_load(root.path().string()); },
        {"checkpoint " + dir, "file model.safetensors: expected " + std::to_string(bytes.size()) +
                                  " bytes, found " + std::to_string(bytes.size() - 10)});
}

TEST(Checkpoint, FlippedByteIsRefusedWithExpectedAndFoundCrc) {
    TempDir root;
    std::string dir =
        checkpoint_save(root.path().string(), 3, FakeTrainState(1.f).files(), state_at(3), 2);
    std::string path = dir + "/optim.safetensors";
    std::string bytes = read_bytes(path);
    uint32_t good = io_crc32(bytes.data(), bytes.size());
    bytes[bytes.size() - 7] ^= 0x10;  // one bit in v's data
    uint32_t bad = io_crc32(bytes.data(), bytes.size());
    write_bytes(path, bytes);
    expect_input_error([&] { checkpoint_load(dir); },
                       {"checkpoint " + dir, "file optim.safetensors: crc32 expected " +
                                                 io_hex32(good) + ", found " + io_hex32(bad)});
    // a flipped byte in the header is also caught by the crc, before any parsing
    std::string mpath = dir + "/model.safetensors";
    std::string mb = read_bytes(mpath);
    mb[10] ^= 0x01;
    write_bytes(mpath, mb);
    expect_input_error([&] { checkpoint_load(dir); }, {"file model.safetensors: crc32 expected"});
}

TEST(Checkpoint, MissingFileAndBadManifestAreRefused) {
    TempDir root;
    std::string dir =
        checkpoint_save(root.path().string(), 1, FakeTrainState(1.f).files(), state_at(1), 2);
    fs::remove(dir + "/optim.safetensors");
    expect_input_error([&] { checkpoint_load(dir); },
                       {"checkpoint " + dir, "file optim.safetensors", "found no file"});

    write_bytes(dir + "/manifest.json", "{\"format\": \"tessera-checkpoint\", \"version\": 2}");
    expect_input_error([&] { checkpoint_load(dir); },
                       {"manifest.json: key \"version\": expected 1, found 2"});
    write_bytes(dir + "/manifest.json", "{\"format\": ");
    expect_input_error([&] { checkpoint_load(dir); },
                       {"checkpoint " + dir, "manifest.json: not valid JSON (byte "});
    write_bytes(
        dir + "/manifest.json",
        R"({"format":"tessera-checkpoint","version":1,"step":1,"files":[{"name":"../x.safetensors","bytes":1,"crc32":1}]})");
    expect_input_error([&] { checkpoint_load(dir); },
                       {"expected a plain NAME.safetensors, found \"../x.safetensors\""});
}

TEST(Checkpoint, LeftoverTempDirIsIgnoredThenCleanedOnNextSave) {
    TempDir root;
    FakeTrainState s(1.f);
    checkpoint_save(root.path().string(), 10, s.files(), state_at(10), 5);

    // Simulate a crash mid-save of step 20: a temp dir with a partial file and even a manifest,
    // plus an incomplete step dir with no manifest (e.g. copied by hand) and a temp `latest`.
    std::string tmp = root / ".tmp-step_00000020.4242";
    fs::create_directories(tmp);
    write_bytes(tmp + "/model.safetensors", "partial");
    write_bytes(tmp + "/manifest.json", "{}");
    fs::create_directories(root / "step_00000030");
    write_bytes(root / "step_00000030/model.safetensors", "partial");
    write_bytes(root / "latest.tmp.4242", "step_000");

    EXPECT_EQ(checkpoint_latest(root.path().string()), root / "step_00000010");
    EXPECT_EQ(checkpoint_load(root.path().string()).step, 10);

    // `latest` pointing at a vanished dir falls back to the newest complete one
    write_bytes(root / "latest", "step_00000099\n");
    EXPECT_EQ(checkpoint_latest(root.path().string()), root / "step_00000010");

    checkpoint_save(root.path().string(), 20, s.files(), state_at(20), 5);
    EXPECT_FALSE(fs::exists(tmp));
    EXPECT_FALSE(fs::exists(root / "latest.tmp.4242"));
    EXPECT_EQ(
        list_dir(root.path().string()),
        (std::vector<std::string>{"latest", "step_00000010", "step_00000020", "step_00000030"}));
    Checkpoint ck = checkpoint_load(root.path().string());
    EXPECT_EQ(ck.step, 20);
    EXPECT_EQ(ck.state, state_at(20));
}
