// Token shards in llm.c's .bin format: a header of 256 int32 (little-endian)
//   [0] = 20240520 (magic), [1] = version, [2] = token count, rest 0
// followed by `count` tokens: version 1 (llm.c's) holds uint16 tokens; version 2, Tessera's
// variant for vocabularies past 65,536 ids (Llama 3, Qwen), holds uint32 tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/io/file_util.h"

namespace tessera {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;    // uint16 tokens (llm.c)
inline constexpr int32_t kShardVersion32 = 2;  // uint32 tokens
inline constexpr int kShardHeaderInts = 256;

// Writes atomically (a temp file in the same folder, then rename); creates parent folders.
// Version 1 when every id fits uint16, else version 2.
void shard_write(const std::string& path, const std::vector<uint32_t>& tokens);
// Either version. InputError naming the file and expected vs found for: missing file, bad magic
// or version, a file shorter or longer than the header says.
std::vector<uint32_t> shard_read(const std::string& path);
// Tokens [first, first + count) of a shard (either version), without reading the rest; the same
// InputErrors as shard_read, and one for a range past the shard's end.
std::vector<uint32_t> shard_read_range(const std::string& path, int64_t first, int64_t count);

// Tokens as the samplers read them, not owned: `size` ids of `width` bytes (2: a version-1
// shard's uint16, 4: uint32), contiguous. A std::vector<uint32_t> converts to one.
struct TokenView {
    const void* data = nullptr;
    int64_t size = 0;
    int width = 4;
    TokenView() = default;
    TokenView(const void* d, int64_t n, int w) : data(d), size(n), width(w) {}
    TokenView(const std::vector<uint32_t>& v)  // NOLINT(google-explicit-constructor): a view
        : data(v.data()), size((int64_t)v.size()) {}
    uint32_t operator[](int64_t i) const {
        return width == 2 ? static_cast<const uint16_t*>(data)[i]
                          : static_cast<const uint32_t*>(data)[i];
    }
    // the largest id, 0 when empty (a vocabulary check in one pass)
    uint32_t max() const;
};

// A shard mapped read-only (io_map_file): its tokens are read where they lie, in the page cache
// that every rank of a host shares; nothing is copied into the process (a rank used to hold the
// whole shard widened to uint32, 4 bytes a token per rank). The same InputErrors as shard_read.
// Copies share the mapping.
class TokenShard {
  public:
    explicit TokenShard(const std::string& path);
    TokenView tokens() const { return view_; }
    int64_t size() const { return view_.size; }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
    MappedFile map_;
    TokenView view_;
};

}  // namespace tessera
