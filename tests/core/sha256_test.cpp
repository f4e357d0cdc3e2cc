// SHA-256 against the standard vectors (FIPS 180-4 examples, NIST CAVS): "", "abc", the
// two-block 448-bit message, one million 'a', and streaming in odd-sized pieces.
#include "engine/core/sha256.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/core/error.h"
#include "tests/support/temp_dir.h"

using tessera::sha256_hex;

TEST(Sha256, StandardVectors) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, StreamingInPiecesEqualsOneShot) {
    std::string text;
    for (int i = 0; i < 5000; i++) text += (char)('a' + (i * 7) % 26);
    for (size_t piece : {1, 3, 55, 56, 63, 64, 65, 127, 1000}) {
        tessera::Sha256 h;
        for (size_t i = 0; i < text.size(); i += piece)
            h.update(std::string_view(text).substr(i, piece));
        EXPECT_EQ(h.hex(), sha256_hex(text)) << "pieces of " << piece;
    }
    // lengths around the padding boundary (55, 56, 64 bytes) differ from each other
    EXPECT_NE(sha256_hex(std::string(55, 'x')), sha256_hex(std::string(56, 'x')));
}

TEST(Sha256, FileAndMissingFile) {
    const tessera::test_support::TempDir scratch("sha256");
    const auto path = scratch.path() / "abc.txt";
    { std::ofstream(path, std::ios::binary) << "abc"; }
    EXPECT_EQ(tessera::sha256_file_hex(path.string()),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    std::filesystem::remove(path);
    try {
        tessera::sha256_file_hex(path.string());
        FAIL() << "no error for a missing file";
    } catch (const tessera::InputError& e) {
        EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
}
