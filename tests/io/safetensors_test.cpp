// safetensors: round trips, byte layout, a file written by hand in Python (and our file read by
// Python), fp32 conversion, and one test per rejected defect with its message.
#include "engine/io/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "tests/io/io_test_util.h"

using namespace tessera;
using tessera::test::expect_input_error;
using tessera::test::read_bytes;
using tessera::test::TempDir;
using tessera::test::write_bytes;

// 8-byte little-endian length + header + data, exactly as given (no padding).
static std::string raw_file(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
    return out + header + data;
}

static uint64_t header_len(const std::string& bytes) {
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i)
        n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
    return n;
}

// ---------------------------------------------------------------------------------------------
// Round trips

TEST(Safetensors, RoundTripSeveralDtypesMetadataAndEmptyTensor) {
    TempDir dir;
    std::vector<float> a = {1.f, -2.f, 3.5f, 0.f, 1e-8f, 6.f};   // (2, 3)
    std::vector<uint16_t> b = {0x3f80, 0xc000, 0x7f80, 0x0001};  // bf16 (4)
    std::vector<int32_t> c = {7, -7, 2147483647};                // (3)
    std::vector<uint8_t> d = {1, 2, 3, 4, 5};                    // (5): odd size
    std::vector<int64_t> e = {-1, int64_t(1) << 40};             // (2)
    float scalar = 42.f;                                         // shape ()
    std::vector<TensorView> views = {
        {"layer.0.w", DType::f32, {2, 3}, a.data()}, {"b", DType::bf16, {4}, b.data()},
        {"ints", DType::i32, {3}, c.data()},         {"bytes", DType::u8, {5}, d.data()},
        {"empty", DType::f32, {0, 4}, nullptr},      {"big", DType::i64, {2}, e.data()},
        {"scalar", DType::f32, {}, &scalar},
    };
    std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "ünïcode \"quoted\""}};
    std::string path = dir / "t.safetensors";
    safetensors_write(path, views, meta);

    SafetensorsFile f = SafetensorsFile::open(path);
    EXPECT_EQ(f.path(), path);
    EXPECT_EQ(f.metadata(), meta);
    ASSERT_EQ(f.entries().size(), views.size());
    for (const TensorView& v : views) {
        const SafetensorsFile::Entry* en = f.find(v.name);
        ASSERT_NE(en, nullptr) << v.name;
        EXPECT_EQ(en->dtype, v.dtype) << v.name;
        EXPECT_EQ(en->shape, v.shape) << v.name;
        size_t nbytes = static_cast<size_t>(shape_numel(v.shape)) * dtype_size(v.dtype);
        ASSERT_EQ(en->nbytes, nbytes) << v.name;
        if (nbytes) {
            EXPECT_EQ(std::memcmp(en->data, v.data, nbytes), 0) << v.name;
        }
    }
    EXPECT_EQ(f.find("nope"), nullptr);
    // no temp file left next to the target
    auto it = std::filesystem::directory_iterator(dir.path().string());
    EXPECT_EQ(std::distance(it, std::filesystem::directory_iterator()), 1);
}

TEST(Safetensors, HeaderIsSpacePaddedToEightBytesAndDataAligned) {
    TempDir dir;
    std::vector<double> x = {1.0, 2.0};
    for (int name_len = 1; name_len <= 9; ++name_len) {  // vary the header length
        std::string path = dir / "p.safetensors";
        safetensors_write(path, {{std::string(name_len, 'x'), DType::f64, {2}, x.data()}});
        std::string bytes = read_bytes(path);
        uint64_t n = header_len(bytes);
        EXPECT_EQ(n % 8, 0u) << name_len;
        EXPECT_EQ(bytes.size(), 8 + n + 16);
        std::string header = bytes.substr(8, n);
        size_t end = header.find_last_not_of(' ');
        EXPECT_EQ(header[end], '}');
        EXPECT_LT(n - 1 - end, 8u);  // fewer than 8 pad spaces
        SafetensorsFile f = SafetensorsFile::open(path);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(f.entries()[0].data) % 8, 0u);
        EXPECT_EQ(std::memcmp(f.entries()[0].data, x.data(), 16), 0);
    }
}

TEST(Safetensors, EmptyFileWithNoTensors) {
    TempDir dir;
    std::string path = dir / "e.safetensors";
    safetensors_write(path, {});
    SafetensorsFile f = SafetensorsFile::open(path);
    EXPECT_TRUE(f.entries().empty());
    EXPECT_TRUE(f.metadata().empty());
}

// ---------------------------------------------------------------------------------------------
// fp32 conversion

TEST(Safetensors, ReadF32ConvertsBf16AndF16) {
    TempDir dir;
    std::vector<float> f32 = {0.25f, -3.f};
    std::vector<uint16_t> bf16 = {0x3fc0 /*1.5*/, 0xc000 /*-2*/, 0x7f80 /*inf*/};
    std::vector<uint16_t> f16 = {
        0x3e00 /*1.5*/,   0xc000 /*-2*/, 0x7bff /*65504*/, 0x0001 /*2^-24*/, 0x8000 /*-0*/,
        0x0200 /*2^-15*/, 0x7e00 /*nan*/};
    std::string path = dir / "c.safetensors";
    safetensors_write(path, {{"a", DType::f32, {2}, f32.data()},
                             {"b", DType::bf16, {3}, bf16.data()},
                             {"h", DType::f16, {7}, f16.data()}});
    SafetensorsFile f = SafetensorsFile::open(path);
    float out[8];
    f.read_f32("a", {2}, out);
    EXPECT_EQ(out[0], 0.25f);
    EXPECT_EQ(out[1], -3.f);
    f.read_f32("b", {3}, out);
    EXPECT_EQ(out[0], 1.5f);
    EXPECT_EQ(out[1], -2.f);
    EXPECT_TRUE(std::isinf(out[2]) && out[2] > 0);
    f.read_f32("h", {7}, out);
    EXPECT_EQ(out[0], 1.5f);
    EXPECT_EQ(out[1], -2.f);
    EXPECT_EQ(out[2], 65504.f);
    EXPECT_EQ(out[3], std::ldexp(1.f, -24));
    EXPECT_TRUE(out[4] == 0.f && std::signbit(out[4]));
    EXPECT_EQ(out[5], std::ldexp(1.f, -15));
    EXPECT_TRUE(std::isnan(out[6]));
}

TEST(Safetensors, ReadF32RejectsMissingWrongShapeAndWrongDtype) {
    TempDir dir;
    std::vector<float> w(6, 1.f);
    std::vector<int32_t> ids = {1, 2};
    std::string path = dir / "m.safetensors";
    safetensors_write(path,
                      {{"w", DType::f32, {2, 3}, w.data()}, {"ids", DType::i32, {2}, ids.data()}});
    SafetensorsFile f = SafetensorsFile::open(path);
    float out[6];
    expect_input_error(
        [&] {
            f.read_f32("w", {3, 2}, out);
        },
        {path, "tensor \"w\"", "expected shape (3, 2), found (2, 3)"});
    expect_input_error(
        [&] {
            f.read_f32("lm_head", {2, 3}, out);
        },
        {path, "tensor \"lm_head\"", "missing", "w"});
    expect_input_error([&] { f.read_f32("ids", {2}, out); },
                       {path, "tensor \"ids\"", "expected dtype F32, BF16 or F16, found I32"});
}

// ---------------------------------------------------------------------------------------------
// Interop with an independent Python implementation (struct + json only)

static const char* k_python = "/usr/bin/python3";

TEST(Safetensors, ReadsFileWrittenByPython) {
    if (!std::filesystem::exists(k_python)) GTEST_SKIP() << "no " << k_python;
    TempDir dir;
    std::string path = dir / "py.safetensors";
    std::string script = dir / "write.py";
    write_bytes(script, R"PY(
import json, struct, sys
# Same recipe as huggingface/safetensors serialize(): metadata first, compact JSON, space pad to 8.
tensors = [
    ("emb", "F32", [2, 2], struct.pack("<4f", 1.0, 2.0, -3.0, 0.5)),
    ("half", "F16", [3], struct.pack("<3e", 1.5, -0.25, 1024.0)),
    ("pos", "I64", [2], struct.pack("<2q", -5, 1 << 40)),
    ("bias", "BF16", [2], struct.pack("<2H", 0x3f80, 0xbf00)),
]
header = {"__metadata__": {"format": "pt", "source": "python"}}
data = b""
for name, dt, shape, raw in tensors:
    header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + data)
)PY");
    ASSERT_EQ(std::system((std::string(k_python) + " " + script + " " + path).c_str()), 0);

    SafetensorsFile f = SafetensorsFile::open(path);
    EXPECT_EQ(f.metadata().at("source"), "python");
    ASSERT_EQ(f.entries().size(), 4u);
    float out[4];
    f.read_f32("emb", {2, 2}, out);
    EXPECT_EQ(out[0], 1.f);
    EXPECT_EQ(out[2], -3.f);
    EXPECT_EQ(out[3], 0.5f);
    f.read_f32("half", {3}, out);
    EXPECT_EQ(out[0], 1.5f);
    EXPECT_EQ(out[1], -0.25f);
    EXPECT_EQ(out[2], 1024.f);
    f.read_f32("bias", {2}, out);
    EXPECT_EQ(out[0], 1.f);
    EXPECT_EQ(out[1], -0.5f);
    const SafetensorsFile::Entry* pos = f.find("pos");
    ASSERT_NE(pos, nullptr);
    EXPECT_EQ(pos->dtype, DType::i64);
    int64_t p[2];
    std::memcpy(p, pos->data, 16);
    EXPECT_EQ(p[0], -5);
    EXPECT_EQ(p[1], int64_t(1) << 40);
}

TEST(Safetensors, FileWeWriteIsReadByPython) {
    if (!std::filesystem::exists(k_python)) GTEST_SKIP() << "no " << k_python;
    TempDir dir;
    std::string path = dir / "ours.safetensors";
    std::vector<float> w = {1.f, 2.f, 3.f, -4.f, 5.f, 6.25f};
    std::vector<uint16_t> h = {0x3c00, 0xc000};  // f16 1, -2
    safetensors_write(path, {{"w", DType::f32, {3, 2}, w.data()}, {"h", DType::f16, {2}, h.data()}},
                      {{"k", "v"}});
    std::string script = dir / "check.py";
    write_bytes(script, R"PY(
import json, struct, sys
b = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", b[:8])
assert n % 8 == 0, n
hdr = json.loads(b[8:8 + n])
data = b[8 + n:]
assert hdr["__metadata__"] == {"k": "v"}, hdr
w = hdr["w"]; h = hdr["h"]
assert w["dtype"] == "F32" and w["shape"] == [3, 2], w
assert struct.unpack("<6f", data[w["data_offsets"][0]:w["data_offsets"][1]]) == (1, 2, 3, -4, 5, 6.25)
assert h["dtype"] == "F16" and struct.unpack("<2e", data[h["data_offsets"][0]:h["data_offsets"][1]]) == (1, -2)
assert max(w["data_offsets"][1], h["data_offsets"][1]) == len(data)
)PY");
    EXPECT_EQ(std::system((std::string(k_python) + " " + script + " " + path).c_str()), 0);
}

// ---------------------------------------------------------------------------------------------
// Rejections: one InputError naming the file and the defect

class SafetensorsReject : public ::testing::Test {
  protected:
    void expect_rejected(const std::string& bytes, std::initializer_list<std::string> fragments) {
        std::string path = dir_ / "bad.safetensors";
        write_bytes(path, bytes);
        expect_input_error([&] { SafetensorsFile::open(path); }, {"safetensors " + path});
        expect_input_error([&] { SafetensorsFile::open(path); }, fragments);
    }
    TempDir dir_;
};

TEST_F(SafetensorsReject, FileShorterThanEightBytes) {
    expect_rejected("abcde", {"file is 5 bytes, expected at least 8"});
}

TEST_F(SafetensorsReject, HeaderLengthLargerThanFile) {
    std::string f = raw_file("{}", "");
    f[0] = static_cast<char>(0xe8), f[1] = 0x03;  // 1000
    expect_rejected(f, {"header length 1000 bytes is larger than the file allows (2 bytes"});
}

TEST_F(SafetensorsReject, HeaderNotJson) {
    expect_rejected(raw_file("{\"a\": [1, 2", ""), {"header (11 bytes): not valid JSON (byte ",
                                                    "expected a JSON object of tensors"});
}

TEST_F(SafetensorsReject, HeaderNotAnObject) {
    expect_rejected(raw_file("[1,2,3]", ""), {"header: expected a JSON object, found array"});
}

TEST_F(SafetensorsReject, UnknownDtype) {
    expect_rejected(raw_file(R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", "ab"),
                    {"tensor \"w\"", "unknown dtype \"Q4\"", "expected one of", "BF16"});
}

TEST_F(SafetensorsReject, NegativeOrNonIntegerShape) {
    expect_rejected(
        raw_file(R"({"w":{"dtype":"U8","shape":[2,-1],"data_offsets":[0,0]}})", ""),
        {"tensor \"w\"", "shape: expected a list of non-negative integers, found [2,-1]"});
    expect_rejected(raw_file(R"({"w":{"dtype":"U8","shape":"2","data_offsets":[0,2]}})", "ab"),
                    {"shape: expected a list of non-negative integers, found \"2\""});
    expect_rejected(raw_file(R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,2]}})", "ab"),
                    {"shape: expected a list"});
}

TEST_F(SafetensorsReject, MissingKey) {
    expect_rejected(raw_file(R"({"w":{"dtype":"U8","shape":[2]}})", "ab"),
                    {"tensor \"w\"", "missing key \"data_offsets\""});
}

TEST_F(SafetensorsReject, OffsetsOutOfRange) {
    expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcd"),
                    {"tensor \"w\"", "data_offsets [0, 8] run past the data section (4 bytes)"});
    expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "abcd"),
                    {"data_offsets [4, 0]: expected begin <= end"});
    expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", "abcd"),
                    {"data_offsets: expected [begin, end] of non-negative integers, found [0,-4]"});
}

TEST_F(SafetensorsReject, OffsetsNotMatchingShapeAndDtype) {
    expect_rejected(raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"),
                    {"tensor \"w\"", "cover 4 bytes, expected 8 (F32 (2))"});
}

TEST_F(SafetensorsReject, OverlappingTensors) {
    expect_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                             "abcdef"),
                    {"tensor \"b\": data_offsets [2, 6] overlap tensor \"a\" [0, 4]"});
}

TEST_F(SafetensorsReject, GapBetweenTensors) {
    expect_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                             R"("b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
                             "abcdef"),
                    {"data bytes [2, 4) are not covered by any tensor"});
}

TEST_F(SafetensorsReject, TrailingBytesAfterData) {
    expect_rejected(raw_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "abXYZ"),
                    {"data section is 5 bytes but tensors cover 2 (3 trailing bytes)"});
}

TEST_F(SafetensorsReject, MetadataValueNotString) {
    expect_rejected(raw_file(R"({"__metadata__":{"epoch":3}})", ""),
                    {"\"__metadata__\".\"epoch\": expected a string, found number 3"});
}

TEST_F(SafetensorsReject, TruncatedRealFile) {
    std::vector<float> w(16, 1.f);
    std::string good = dir_ / "good.safetensors";
    safetensors_write(good, {{"w", DType::f32, {4, 4}, w.data()}});
    std::string bytes = read_bytes(good);
    expect_rejected(bytes.substr(0, bytes.size() - 5),
                    {"tensor \"w\"", "data_offsets [0, 64] run past the data section (59 bytes)"});
    expect_rejected(bytes.substr(0, 20), {"header length"});
}

TEST_F(SafetensorsReject, MissingFile) {
    std::string path = dir_ / "absent.safetensors";
    expect_input_error([&] { SafetensorsFile::open(path); }, {path, "cannot open"});
}
