// Token shards in llm.c's .bin format: a header of 256 int32 (little-endian)
//   [0] = 20240520 (magic), [1] = version, [2] = token count, rest 0
// followed by `count` tokens: version 1 (llm.c's) holds uint16 tokens; version 2, Tessera's
// variant for vocabularies past 65,536 ids (Llama 3, Qwen), holds uint32 tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace tessera
