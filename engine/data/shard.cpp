// llm.c .bin token shards: write (atomic) and read (validated). See shard.h for the format.
#include "engine/data/shard.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>

#include "engine/core/atomic_file.h"
#include "engine/core/error.h"
#include "engine/core/unique_fd.h"

namespace tessera {

void shard_write(const std::string& path, const std::vector<uint32_t>& tokens) {
    if (tokens.size() > (size_t)std::numeric_limits<int32_t>::max())
        throw InputError(
            str_cat(path, ": ", tokens.size(), " tokens do not fit one shard (max 2^31-1)"));
    std::filesystem::path p(path);
    if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
    int32_t header[kShardHeaderInts] = {};
    header[0] = kShardMagic;
    const bool wide =
        std::any_of(tokens.begin(), tokens.end(), [](uint32_t t) { return t > 0xFFFF; });
    header[1] = wide ? kShardVersion32 : kShardVersion;
    header[2] = (int32_t)tokens.size();
    if (wide) {
        file_write_atomic(
            path, {{header, sizeof(header)}, {tokens.data(), tokens.size() * sizeof(uint32_t)}});
    } else {
        const std::vector<uint16_t> narrow(tokens.begin(), tokens.end());
        file_write_atomic(
            path, {{header, sizeof(header)}, {narrow.data(), narrow.size() * sizeof(uint16_t)}});
    }
}

namespace {
InputError shard_not_found(const std::string& path) {
    return InputError(str_cat("token shard not found: ", path));
}

// Checks a shard of `size` bytes whose first bytes are `header` (read only when the file holds a
// whole header); returns the token count and the bytes per token.
void shard_check(const std::string& path, long size, const int32_t* header, int32_t& count,
                 long& width) {
    const long header_bytes = (long)sizeof(int32_t) * kShardHeaderInts;
    if (size < header_bytes)
        throw InputError(str_cat(path, ": truncated token shard: expected a ", header_bytes,
                                 "-byte header, found a ", size, "-byte file"));
    if (header[0] != kShardMagic)
        throw InputError(str_cat(path, ": bad magic in token shard header: expected ", kShardMagic,
                                 ", found ", header[0], " (not an llm.c .bin shard)"));
    if (header[1] != kShardVersion && header[1] != kShardVersion32)
        throw InputError(str_cat(path, ": unsupported token shard version: expected ",
                                 kShardVersion, " (uint16) or ", kShardVersion32,
                                 " (uint32), found ", header[1]));
    width = header[1] == kShardVersion32 ? 4 : 2;
    count = header[2];
    long expected = header_bytes + width * (count < 0 ? 0 : count);
    if (count < 0 || size != expected)
        throw InputError(str_cat(path, ": ", size < expected ? "truncated" : "oversized",
                                 " token shard: header says ", count, " tokens (", expected,
                                 " bytes), found ", size, " bytes"));
}

// Opens and validates a shard; returns the token count and the bytes per token.
FilePtr shard_open(const std::string& path, int32_t& count, long& width) {
    FilePtr f(std::fopen(path.c_str(), "rb"));
    if (!f) throw shard_not_found(path);
    std::fseek(f.get(), 0, SEEK_END);
    long size = std::ftell(f.get());
    std::fseek(f.get(), 0, SEEK_SET);
    int32_t header[kShardHeaderInts] = {};
    if (size >= (long)sizeof(header) && std::fread(header, sizeof(header), 1, f.get()) != 1)
        throw InputError(str_cat(path, ": cannot read the shard header"));
    shard_check(path, size, header, count, width);
    return f;
}

// Reads `count` tokens of `width` bytes at the file's position.
std::vector<uint32_t> shard_read_tokens(FILE* f, const std::string& path, long width,
                                        int64_t count) {
    std::vector<uint32_t> tokens((size_t)count);
    bool ok = true;
    if (width == 4) {
        ok = count == 0 || std::fread(tokens.data(), 4, tokens.size(), f) == tokens.size();
    } else if (count > 0) {
        std::vector<uint16_t> narrow((size_t)count);
        ok = std::fread(narrow.data(), 2, narrow.size(), f) == narrow.size();
        std::copy(narrow.begin(), narrow.end(), tokens.begin());
    }
    if (!ok) throw InputError(str_cat(path, ": short read of ", count, " tokens"));
    return tokens;
}
}  // namespace

std::vector<uint32_t> shard_read(const std::string& path) {
    int32_t count = 0;
    long width = 0;
    FilePtr f = shard_open(path, count, width);
    return shard_read_tokens(f.get(), path, width, count);
}

std::vector<uint32_t> shard_read_range(const std::string& path, int64_t first, int64_t count) {
    int32_t total = 0;
    long width = 0;
    FilePtr f = shard_open(path, total, width);
    if (first < 0 || count < 0 || first + count > total)
        throw InputError(str_cat(path, ": tokens [", first, ", ", first + count,
                                 ") requested, the shard holds ", total));
    std::fseek(f.get(), (long)(sizeof(int32_t) * kShardHeaderInts + width * first), SEEK_SET);
    return shard_read_tokens(f.get(), path, width, count);
}

uint32_t TokenView::max() const {
    uint32_t m = 0;
    if (width == 2) {
        const auto* p = static_cast<const uint16_t*>(data);
        for (int64_t i = 0; i < size; ++i) m = std::max<uint32_t>(m, p[i]);
    } else {
        const auto* p = static_cast<const uint32_t*>(data);
        for (int64_t i = 0; i < size; ++i) m = std::max(m, p[i]);
    }
    return m;
}

TokenShard::TokenShard(const std::string& path) : path_(path) {
    if (!std::filesystem::exists(path)) throw shard_not_found(path);
    map_ = io_map_file(path);  // checked as mapped: one open, no window for a replacement
    const auto* header = reinterpret_cast<const int32_t*>(map_.data.get());
    int32_t count = 0;
    long width = 0;
    shard_check(path, (long)map_.size, header, count, width);
    view_ = TokenView(header + kShardHeaderInts, count, (int)width);
}

}  // namespace tessera
