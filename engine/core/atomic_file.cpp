// Temp file + fsync + rename + folder fsync (atomic_file.h).
#include "engine/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "engine/core/error.h"
#include "engine/core/unique_fd.h"

namespace tessera {

namespace {

std::string errno_str() {
    return std::strerror(errno);
}

// Creates `tmp` and writes `pieces` to it, then fsync + close (close's result checked: a
// deferred write error surfaces there).
void tmp_write(const std::string& tmp, std::initializer_list<FileBytes> pieces) {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd)
        throw Error(str_cat(tmp, ": cannot create: ", errno_str(),
                            " (check the folder exists and is writable)"));
    size_t done = 0;
    for (const FileBytes& piece : pieces) {
        const char* p = static_cast<const char*>(piece.data);
        size_t left = piece.bytes;
        while (left > 0) {
            ssize_t w = ::write(fd.get(), p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0)
                throw Error(str_cat(tmp, ": write failed after ", done, " bytes: ", errno_str()));
            p += w;
            left -= static_cast<size_t>(w);
            done += static_cast<size_t>(w);
        }
    }
    if (::fsync(fd.get()) != 0) throw Error(str_cat(tmp, ": fsync failed: ", errno_str()));
    if (fd.close() != 0) throw Error(str_cat(tmp, ": close failed: ", errno_str()));
}

}  // namespace

std::string file_parent_dir(const std::string& path) {
    size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

void file_fsync_dir(const std::string& dir) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) throw Error(str_cat(dir, ": cannot open directory for fsync: ", errno_str()));
    if (::fsync(fd.get()) != 0)
        throw Error(str_cat(dir, ": directory fsync failed: ", errno_str()));
}

void file_replace_atomic(const std::string& path,
                         const std::function<void(const std::string& tmp)>& write) {
    const std::string tmp = str_cat(path, ".tmp.", ::getpid());
    try {
        write(tmp);
        if (::rename(tmp.c_str(), path.c_str()) != 0)
            throw Error(str_cat("cannot rename ", tmp, " to ", path, ": ", errno_str()));
    } catch (...) {
        ::unlink(tmp.c_str());
        throw;
    }
    file_fsync_dir(file_parent_dir(path));
}

void file_write_atomic(const std::string& path, std::initializer_list<FileBytes> pieces) {
    file_replace_atomic(path, [&](const std::string& tmp) { tmp_write(tmp, pieces); });
}

}  // namespace tessera
