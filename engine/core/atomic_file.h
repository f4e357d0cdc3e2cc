// Replacing a file as a whole or not at all: the one "write a temp file, then rename it" in the
// engine. The bytes go to PATH.tmp.PID beside the target (same folder, so rename(2) is atomic),
// which is fsync'ed, renamed over PATH, and then the folder is fsync'ed, so after a crash PATH
// holds either its old or its new content. On any failure the temp file is removed and an
// `Error` names the path, what failed and strerror. Readers that sweep a folder may treat a
// leftover "*.tmp.*" (a killed process) as garbage.
#pragma once
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

namespace tessera {

// A run of bytes to write: `bytes` bytes from `data` (data may be null when bytes is 0).
struct FileBytes {
    const void* data = nullptr;
    size_t bytes = 0;
};

// Writes `pieces` in order as the new content of `path`. The parent folder must exist.
void file_write_atomic(const std::string& path, std::initializer_list<FileBytes> pieces);
inline void file_write_atomic(const std::string& path, std::string_view content) {
    file_write_atomic(path, {FileBytes{content.data(), content.size()}});
}

// For writers that stream a file themselves: `write(tmp)` creates and fills the temp file (and
// makes it durable: fsync before returning); it is then renamed over `path` and the folder is
// fsync'ed. If `write` throws, the temp file is removed and the exception passes on.
void file_replace_atomic(const std::string& path,
                         const std::function<void(const std::string& tmp)>& write);

// "." for "name", "/" for "/name", otherwise everything before the last slash.
std::string file_parent_dir(const std::string& path);

// fsync(2) of a folder, so that a rename or a new entry in it survives a crash.
void file_fsync_dir(const std::string& dir);

}  // namespace tessera
