// Durable file plumbing shared by safetensors and checkpoints: a read-only mapping of a whole
// file, zlib crc32 over large buffers, an fsync'ing writer, rename. (Replacing a file atomically
// and folder fsync: engine/core/atomic_file.h.) All failures of the OS are `Error`s naming the
// path and strerror.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/unique_fd.h"

namespace tessera {

// ---------------------------------------------------------------------------------------------
// Reading

// A whole file mapped read-only (MAP_PRIVATE). `data` stays valid while any copy is alive.
// Empty files have size 0 and a null data pointer. Files are only ever replaced by rename, never
// truncated in place, so the mapping cannot lose pages under us.
struct MappedFile {
    std::shared_ptr<const uint8_t> data;
    size_t size = 0;
};
MappedFile io_map_file(const std::string& path);  // InputError when missing or not a regular file

// zlib crc32 of `n` bytes (chunks past zlib's 32-bit length limit); `crc` continues a running sum.
uint32_t io_crc32(const void* data, size_t n, uint32_t crc = 0);
std::string io_hex32(uint32_t v);  // "0x0000abcd"

// ---------------------------------------------------------------------------------------------
// Writing

// Writes a file sequentially, keeping a running byte count and crc32. `finish()` fsyncs and
// closes; the destructor closes (without fsync) if finish() was never reached.
class FileWriter {
  public:
    explicit FileWriter(const std::string& path);  // creates / truncates, mode 0644
    ~FileWriter();
    FileWriter(const FileWriter&) = delete;
    FileWriter& operator=(const FileWriter&) = delete;

    void write(const void* data, size_t n);
    void finish();  // fsync + close
    uint64_t bytes() const { return bytes_; }
    uint32_t crc32() const { return crc_; }

  private:
    std::string path_;
    UniqueFd fd_;
    uint64_t bytes_ = 0;
    uint32_t crc_ = 0;
};

void io_rename(const std::string& from, const std::string& to);  // rename(2), Error on failure

}  // namespace tessera
