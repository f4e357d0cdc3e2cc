// safetensors reader/writer: header building, atomic write, full validation on read, fp32
// conversion. See safetensors.h for the layout.
#include "engine/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/core/atomic_file.h"
#include "engine/core/error.h"
#include "engine/core/json_text.h"

namespace tessera {

static constexpr DType k_all_dtypes[] = {
    DType::boolean, DType::u8,  DType::i8,  DType::i16, DType::u16, DType::f16, DType::bf16,
    DType::i32,     DType::u32, DType::f32, DType::f64, DType::i64, DType::u64};

std::optional<DType> safetensors_parse_dtype(const std::string& name) {
    for (DType t : k_all_dtypes)
        if (name == dtype_name(t)) return t;
    return std::nullopt;
}

static std::string all_dtype_names() {
    std::string s;
    for (DType t : k_all_dtypes) s += str_cat(s.empty() ? "" : ", ", dtype_name(t));
    return s;
}

// ---------------------------------------------------------------------------------------------
// Writing

static std::string header_build(const std::vector<TensorView>& tensors,
                                const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    if (!metadata.empty()) {
        nlohmann::ordered_json m = nlohmann::ordered_json::object();
        for (const auto& [k, v] : metadata) m[k] = v;
        h["__metadata__"] = m;
    }
    std::set<std::string> seen;
    uint64_t offset = 0;
    for (const TensorView& t : tensors) {
        TS_CHECK(!t.name.empty() && t.name != "__metadata__", "bad tensor name '", t.name, "'");
        TS_CHECK(seen.insert(t.name).second, "duplicate tensor name '", t.name, "'");
        for (int64_t d : t.shape) TS_CHECK(d >= 0, "negative dim in ", t.name, shape_str(t.shape));
        uint64_t nbytes = static_cast<uint64_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
        TS_CHECK(nbytes == 0 || t.data != nullptr, "tensor '", t.name, "' has no data");
        nlohmann::ordered_json e = nlohmann::ordered_json::object();
        e["dtype"] = dtype_name(t.dtype);
        e["shape"] = t.shape;
        e["data_offsets"] = {offset, offset + nbytes};
        h[t.name] = e;
        offset += nbytes;
    }
    std::string s = h.dump();  // compact, like serde_json
    s.append((8 - s.size() % 8) % 8, ' ');
    return s;
}

SafetensorsWritten safetensors_write_direct(const std::string& path,
                                            const std::vector<TensorView>& tensors,
                                            const std::map<std::string, std::string>& metadata) {
    std::string header = header_build(tensors, metadata);
    uint8_t len[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    FileWriter w(path);
    w.write(len, 8);
    w.write(header.data(), header.size());
    for (const TensorView& t : tensors) {
        size_t nbytes = static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
        if (nbytes) w.write(t.data, nbytes);
    }
    w.finish();
    return {w.bytes(), w.crc32()};
}

void safetensors_write(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    file_replace_atomic(
        path, [&](const std::string& tmp) { safetensors_write_direct(tmp, tensors, metadata); });
}

// ---------------------------------------------------------------------------------------------
// Reading and validation

// Every header defect is reported as "safetensors FILE: header ...: what, expected X, found Y".
[[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw InputError(str_cat("safetensors ", path, ": ", what));
}

static std::string json_short(const nlohmann::json& j) {
    std::string s = j.dump();
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
    return from_mapped(path, io_map_file(path));
}

SafetensorsFile SafetensorsFile::from_mapped(const std::string& path, MappedFile file) {
    SafetensorsFile f;
    f.path_ = path;
    f.file_ = std::move(file);
    const uint8_t* p = f.file_.data.get();
    const size_t size = f.file_.size;

    // --- the 8-byte length and the header bytes
    if (size < 8)
        fail(path, str_cat("file is ", size, " bytes, expected at least 8 (the header length)"));
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(p[i]) << (8 * i);
    if (n > size - 8)
        fail(path, str_cat("header length ", n, " bytes is larger than the file allows (", size - 8,
                           " bytes after the 8-byte length)"));
    const nlohmann::json h = json_parse_text(
        std::string_view(reinterpret_cast<const char*>(p) + 8, n),
        str_cat("safetensors ", path, ": header (", n, " bytes)"), "a JSON object of tensors");
    if (!h.is_object()) fail(path, str_cat("header: expected a JSON object, found ", json_kind(h)));

    const uint8_t* data = p + 8 + n;
    const uint64_t data_size = size - 8 - n;

    // --- per-tensor entries
    struct Span {
        uint64_t b, e;
        size_t idx;
    };
    std::vector<Span> spans;
    for (auto it = h.begin(); it != h.end(); ++it) {
        const std::string& name = it.key();
        const nlohmann::json& v = it.value();
        if (name == "__metadata__") {
            if (!v.is_object())
                fail(path,
                     str_cat("header key \"__metadata__\": expected an object of strings, found ",
                             v.type_name()));
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string())
                    fail(path, str_cat("header key \"__metadata__\".\"", m.key(),
                                       "\": expected a string, found ", json_kind(m.value())));
                f.metadata_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        std::string where = str_cat("tensor \"", name, "\": ");
        if (!v.is_object()) fail(path, str_cat(where, "expected an object, found ", v.type_name()));
        for (const char* key : {"dtype", "shape", "data_offsets"})
            if (!v.contains(key)) fail(path, str_cat(where, "missing key \"", key, "\""));

        const nlohmann::json& jd = v["dtype"];
        std::optional<DType> dt;
        if (jd.is_string()) dt = safetensors_parse_dtype(jd.get<std::string>());
        if (!dt)
            fail(path, str_cat(where, "unknown dtype ", json_short(jd), ", expected one of ",
                               all_dtype_names()));

        const nlohmann::json& js = v["shape"];
        Shape shape;
        bool shape_ok = js.is_array();
        uint64_t numel = 1;
        if (shape_ok) {
            for (const auto& d : js) {
                if (!d.is_number_integer() ||
                    (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0)) {
                    shape_ok = false;
                    break;
                }
                uint64_t du = d.get<uint64_t>();
                if (du > (uint64_t(1) << 62) || __builtin_mul_overflow(numel, du, &numel)) {
                    shape_ok = false;
                    break;
                }
                shape.push_back(static_cast<int64_t>(du));
            }
        }
        if (!shape_ok)
            fail(path, str_cat(where, "shape: expected a list of non-negative integers, found ",
                               json_short(js)));

        const nlohmann::json& jo = v["data_offsets"];
        if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() ||
            !jo[1].is_number_unsigned())
            fail(path,
                 str_cat(where,
                         "data_offsets: expected [begin, end] of non-negative integers, found ",
                         json_short(jo)));
        uint64_t b = jo[0].get<uint64_t>(), e = jo[1].get<uint64_t>();
        if (b > e)
            fail(path, str_cat(where, "data_offsets [", b, ", ", e, "]: expected begin <= end"));
        if (e > data_size)
            fail(path, str_cat(where, "data_offsets [", b, ", ", e, "] run past the data section (",
                               data_size, " bytes)"));
        uint64_t want = 0;
        if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(*dt)), &want) ||
            want != e - b)
            fail(path, str_cat(where, "data_offsets [", b, ", ", e, "] cover ", e - b,
                               " bytes, expected ", want, " (", dtype_name(*dt), " ",
                               shape_str(shape), ")"));
        spans.push_back({b, e, f.entries_.size()});
        f.entries_.push_back({name, *dt, shape, data + b, static_cast<size_t>(e - b)});
    }

    // --- the data section must be covered exactly: no overlap, no gap, no trailing bytes
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.b != b.b ? a.b < b.b : a.e < b.e; });
    uint64_t cursor = 0;
    const Span* prev = nullptr;
    for (const Span& s : spans) {
        const Entry& en = f.entries_[s.idx];
        if (s.b < cursor)
            fail(path, str_cat("tensor \"", en.name, "\": data_offsets [", s.b, ", ", s.e,
                               "] overlap tensor \"", f.entries_[prev->idx].name, "\" [", prev->b,
                               ", ", prev->e, "]"));
        if (s.b > cursor)
            fail(path,
                 str_cat("data bytes [", cursor, ", ", s.b,
                         ") are not covered by any tensor (expected tensors to be contiguous)"));
        cursor = s.e;
        prev = &s;
    }
    if (cursor != data_size)
        fail(path, str_cat("data section is ", data_size, " bytes but tensors cover ", cursor, " (",
                           data_size - cursor, " trailing bytes)"));

    // entries in data order; index by name
    std::vector<Entry> sorted;
    sorted.reserve(spans.size());
    for (const Span& s : spans) sorted.push_back(f.entries_[s.idx]);
    f.entries_ = std::move(sorted);
    for (size_t i = 0; i < f.entries_.size(); ++i) f.index_[f.entries_[i].name] = i;
    return f;
}

const SafetensorsFile::Entry* SafetensorsFile::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &entries_[it->second];
}

// ---------------------------------------------------------------------------------------------
// fp32 conversion

float bf16_to_f32(uint16_t b) {
    uint32_t bits = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);  // normal: rebias 15 -> 127
    } else if (mant == 0) {
        bits = sign;  // signed zero
    } else {
        // subnormal: value = mant * 2^-24; normalise into an f32 normal
        int e = -1;
        do {
            mant <<= 1;
            ++e;
        } while ((mant & 0x400) == 0);
        bits = sign | static_cast<uint32_t>(112 - e) << 23 | ((mant & 0x3ff) << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

void SafetensorsFile::read_f32(const std::string& name, const Shape& expected, float* dst) const {
    const Entry* e = find(name);
    if (!e) {
        std::string have;
        for (size_t i = 0; i < entries_.size() && i < 8; ++i)
            have += str_cat(i ? ", " : "", entries_[i].name);
        if (entries_.size() > 8) have += ", ...";
        throw InputError(str_cat("safetensors ", path_, ": tensor \"", name, "\" ",
                                 shape_str(expected), " is missing (file has ", entries_.size(),
                                 " tensors", have.empty() ? "" : ": ", have, ")"));
    }
    if (e->shape != expected)
        throw InputError(str_cat("safetensors ", path_, ": tensor \"", name, "\": expected shape ",
                                 shape_str(expected), ", found ", shape_str(e->shape)));
    size_t n = static_cast<size_t>(shape_numel(e->shape));
    switch (e->dtype) {
        case DType::f32:
            if (n) std::memcpy(dst, e->data, n * 4);
            return;
        case DType::bf16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t v;
                std::memcpy(&v, e->data + 2 * i, 2);
                dst[i] = bf16_to_f32(v);
            }
            return;
        case DType::f16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t v;
                std::memcpy(&v, e->data + 2 * i, 2);
                dst[i] = f16_to_f32(v);
            }
            return;
        default:
            throw InputError(str_cat("safetensors ", path_, ": tensor \"", name,
                                     "\": expected dtype F32, BF16 or F16, found ",
                                     dtype_name(e->dtype)));
    }
}

}  // namespace tessera
