// Fashion-MNIST from the Debian package dataset-fashion-mnist: gzip'd IDX files
// (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-*).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/data/cache.h"

namespace tessera {

struct ImageSet {
    int count = 0, rows = 0, cols = 0;
    std::vector<uint8_t> pixels;  // (count, rows, cols), 0..255, row-major
    std::vector<uint8_t> labels;  // (count), 0..9
};

// split: "train" (60000 images) or "test" (10000). InputError for a missing file, a bad magic
// number (2051 images / 2049 labels), image and label counts that differ, or a short file.
ImageSet fashion_mnist_load(const std::string& split,
                            const std::string& dir = kFashionMnistDefaultDir);

}  // namespace tessera
