// Token shards in llm.c's .bin format: a header of 256 int32 (little-endian)
//   [0] = 20240520 (magic), [1] = 1 (version), [2] = token count, rest 0
// followed by `count` uint16 tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int kShardHeaderInts = 256;

// Writes atomically (a temp file in the same folder, then rename); creates parent folders.
void shard_write(const std::string& path, const std::vector<uint16_t>& tokens);
// InputError naming the file and expected vs found for: missing file, bad magic or version,
// a file shorter or longer than the header says.
std::vector<uint16_t> shard_read(const std::string& path);

}  // namespace tessera
