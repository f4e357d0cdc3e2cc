// safetensors: the Hugging Face tensor file format, read and written without Python.
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header, space-padded to a multiple of 8][data]
//   header = {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [..],
//             "data_offsets": [begin, end]}, ...}   offsets are relative to the data section.
//
// Reading maps the file and validates it fully (every tensor's bytes inside the data section,
// sized numel * dtype size, tensors covering the data section exactly with no overlap or gap);
// any defect is one InputError naming the file, the tensor and expected vs found.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/io/file_util.h"

namespace tessera {

// A borrowed tensor to write: `data` holds numel(shape) * dtype_size(dtype) bytes, row-major.
struct TensorView {
    std::string name;
    DType dtype;
    Shape shape;
    const void* data;
};

// "F32" -> DType::f32 ... (safetensors spelling); nullopt for an unknown name.
std::optional<DType> safetensors_parse_dtype(const std::string& name);

struct SafetensorsWritten {
    uint64_t bytes = 0;
    uint32_t crc32 = 0;  // zlib crc32 of the whole file
};

// Writes `path` atomically: temp sibling, fsync, rename, fsync the directory. Tensors are laid
// out in the given order; the header is padded with spaces to a multiple of 8 bytes, so every
// tensor's data starts 8-byte aligned when its predecessors' sizes are multiples of 8.
void safetensors_write(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Writes `path` in place (no temp / rename) and fsyncs it; returns its size and crc32. For
// callers that provide atomicity themselves (checkpoint_save writes into a temp directory).
SafetensorsWritten safetensors_write_direct(
    const std::string& path, const std::vector<TensorView>& tensors,
    const std::map<std::string, std::string>& metadata = {});

class SafetensorsFile {
  public:
    struct Entry {
        std::string name;
        DType dtype;
        Shape shape;
        const uint8_t* data;  // into the mapping; valid while any copy of the file object lives
        size_t nbytes;
    };

    // Maps and fully validates the file.
    static SafetensorsFile open(const std::string& path);
    // Validates an already mapped file (checkpoint_load checks size and crc32 first).
    static SafetensorsFile from_mapped(const std::string& path, MappedFile file);

    const std::vector<Entry>& entries() const { return entries_; }  // in data-offset order
    const Entry* find(const std::string& name) const;
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const std::string& path() const { return path_; }

    // Copies tensor `name` into dst (numel(expected) floats) as fp32, converting from F32, BF16
    // or F16. InputError naming the file and tensor when it is missing, its shape differs from
    // `expected`, or its dtype is not one of those three.
    void read_f32(const std::string& name, const Shape& expected, float* dst) const;

  private:
    std::string path_;
    MappedFile file_;
    std::vector<Entry> entries_;
    std::map<std::string, size_t> index_;  // name -> position in entries_
    std::map<std::string, std::string> metadata_;
};

// Scalar conversions (exposed for tests and the model importer).
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t b);

}  // namespace tessera
