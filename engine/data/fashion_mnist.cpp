// Reads gzip'd IDX files (big-endian int32 header: magic, dims...; then uint8 data) with zlib.
#include "engine/data/fashion_mnist.h"

#include <zlib.h>

#include <filesystem>
#include <memory>

#include "engine/core/error.h"

namespace tessera {

namespace {

struct GzCloser {
    void operator()(gzFile_s* f) const { gzclose(f); }
};

std::vector<uint8_t> gz_read_all(const std::string& path) {
    if (!std::filesystem::exists(path))
        throw InputError(str_cat("Fashion-MNIST file not found: ", path,
                                 " (install it: apt-get install dataset-fashion-mnist)"));
    std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
    if (!f) throw InputError(str_cat("cannot open ", path));
    std::vector<uint8_t> out;
    uint8_t buf[1 << 16];
    for (;;) {
        int n = gzread(f.get(), buf, sizeof(buf));
        if (n < 0) {
            int err = 0;
            throw InputError(str_cat(path, ": corrupt gzip data: ", gzerror(f.get(), &err)));
        }
        if (n == 0) break;
        out.insert(out.end(), buf, buf + n);
    }
    return out;
}

uint32_t be32(const std::vector<uint8_t>& b, size_t off) {
    return (uint32_t)b[off] << 24 | (uint32_t)b[off + 1] << 16 | (uint32_t)b[off + 2] << 8 |
           b[off + 3];
}

// Checks the IDX header; returns the dims.
std::vector<uint32_t> idx_header(const std::string& path, const std::vector<uint8_t>& b,
                                 uint32_t magic, int ndims) {
    size_t header_bytes = 4 + 4 * (size_t)ndims;
    if (b.size() < header_bytes)
        throw InputError(str_cat(path, ": truncated IDX file: expected a ", header_bytes,
                                 "-byte header, found ", b.size(), " bytes"));
    if (be32(b, 0) != magic)
        throw InputError(
            str_cat(path, ": bad IDX magic number: expected ", magic, ", found ", be32(b, 0)));
    std::vector<uint32_t> dims;
    size_t total = 1;
    for (int d = 0; d < ndims; d++) {
        dims.push_back(be32(b, 4 + 4 * d));
        total *= dims.back();
    }
    if (b.size() != header_bytes + total)
        throw InputError(str_cat(path, ": IDX size mismatch: header says ", total, " data bytes (",
                                 header_bytes + total, " in all), found ", b.size(), " bytes"));
    return dims;
}

}  // namespace

ImageSet fashion_mnist_load(const std::string& split, const std::string& dir) {
    std::string prefix;
    if (split == "train")
        prefix = "train";
    else if (split == "test")
        prefix = "t10k";
    else
        throw InputError(str_cat("Fashion-MNIST split '", split, "': expected train or test"));
    std::string images_path = str_cat(dir, "/", prefix, "-images-idx3-ubyte.gz");
    std::string labels_path = str_cat(dir, "/", prefix, "-labels-idx1-ubyte.gz");

    std::vector<uint8_t> ib = gz_read_all(images_path);
    std::vector<uint32_t> idims = idx_header(images_path, ib, 2051, 3);
    std::vector<uint8_t> lb = gz_read_all(labels_path);
    std::vector<uint32_t> ldims = idx_header(labels_path, lb, 2049, 1);
    if (idims[0] != ldims[0])
        throw InputError(str_cat(labels_path, ": label count does not match ", images_path,
                                 ": expected ", idims[0], " labels, found ", ldims[0]));

    ImageSet set;
    set.count = (int)idims[0];
    set.rows = (int)idims[1];
    set.cols = (int)idims[2];
    set.pixels.assign(ib.begin() + 16, ib.end());
    set.labels.assign(lb.begin() + 8, lb.end());
    for (size_t i = 0; i < set.labels.size(); i++)
        if (set.labels[i] > 9)
            throw InputError(str_cat(labels_path, ": label ", i, " is ", (int)set.labels[i],
                                     ", expected a class in 0..9"));
    return set;
}

}  // namespace tessera
