// Durable file plumbing: mapping, crc32, fsync'ing writer, rename.
#include "engine/io/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/core/error.h"
#include "engine/core/unique_fd.h"

namespace tessera {

static std::string errno_str() {
    return std::strerror(errno);
}

// ---------------------------------------------------------------------------------------------
// Reading

MappedFile io_map_file(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) throw InputError(str_cat(path, ": cannot open: ", errno_str()));
    struct stat st;
    if (::fstat(fd.get(), &st) != 0)
        throw InputError(str_cat(path, ": cannot stat: ", errno_str()));
    if (!S_ISREG(st.st_mode)) {
        throw InputError(str_cat(path, ": expected a regular file, found ",
                                 S_ISDIR(st.st_mode) ? "a directory" : "something else"));
    }
    MappedFile m;
    m.size = static_cast<size_t>(st.st_size);
    if (m.size == 0) return m;
    void* p = ::mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    std::string e = errno_str();
    fd.reset();  // the mapping keeps the file
    if (p == MAP_FAILED) throw Error(str_cat(path, ": mmap of ", m.size, " bytes failed: ", e));
    size_t n = m.size;
    // the deleter unmaps (the only munmap)
    m.data = std::shared_ptr<const uint8_t>(static_cast<const uint8_t*>(p),
                                            [n](const uint8_t* q) { ::munmap((void*)q, n); });
    return m;
}

uint32_t io_crc32(const void* data, size_t n, uint32_t crc) {
    const Bytef* p = static_cast<const Bytef*>(data);
    uLong c = crc;
    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : static_cast<uInt>(n);
        c = ::crc32(c, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return static_cast<uint32_t>(c);
}

std::string io_hex32(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", v);
    return buf;
}

// ---------------------------------------------------------------------------------------------
// Writing

FileWriter::FileWriter(const std::string& path) : path_(path) {
    fd_.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd_) throw Error(str_cat(path, ": cannot create: ", errno_str()));
}

FileWriter::~FileWriter() = default;  // fd_ closes (without fsync) if finish() was not reached

void FileWriter::write(const void* data, size_t n) {
    TS_CHECK(fd_.get() >= 0, "write after finish on ", path_);
    crc_ = io_crc32(data, n, crc_);
    const char* p = static_cast<const char*>(data);
    size_t left = n;
    while (left > 0) {
        ssize_t w = ::write(fd_.get(), p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            throw Error(str_cat(path_, ": write failed after ", bytes_, " bytes: ", errno_str()));
        }
        p += w;
        left -= static_cast<size_t>(w);
        bytes_ += static_cast<uint64_t>(w);
    }
}

void FileWriter::finish() {
    TS_CHECK(fd_.get() >= 0, "finish called twice on ", path_);
    if (::fsync(fd_.get()) != 0) throw Error(str_cat(path_, ": fsync failed: ", errno_str()));
    int rc = fd_.close();  // its result matters: a deferred write error surfaces here
    if (rc != 0) throw Error(str_cat(path_, ": close failed: ", errno_str()));
}

void io_rename(const std::string& from, const std::string& to) {
    if (::rename(from.c_str(), to.c_str()) != 0)
        throw Error(str_cat("cannot rename ", from, " to ", to, ": ", errno_str()));
}

}  // namespace tessera
