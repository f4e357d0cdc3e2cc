// SHA-256 (FIPS 180-4), for content fingerprints (prepared data manifests, resume keys). Not
// constant-time and not for secrets; a few hundred MB/s, enough to hash inputs once.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

class Sha256 {
  public:
    Sha256();
    void update(const void* data, size_t bytes);
    void update(std::string_view s) { update(s.data(), s.size()); }
    std::array<uint8_t, 32> digest();  // finishes; the object must not be updated afterwards
    std::string hex();                 // digest() as 64 lowercase hex digits

  private:
    void block(const uint8_t* p);
    uint32_t h_[8];
    uint8_t buf_[64];
    size_t buf_len_ = 0;
    uint64_t total_bytes_ = 0;
};

// The hex digest of `s`.
std::string sha256_hex(std::string_view s);
// The hex digest of a file's bytes; InputError naming the file when it cannot be read.
std::string sha256_file_hex(const std::string& path);

}  // namespace tessera
