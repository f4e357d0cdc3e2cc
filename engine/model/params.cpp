#include "engine/model/params.h"

#include <cmath>

#include "engine/core/error.h"

namespace tessera {

const ParamInfo& ParamTable::add(std::string name, Shape shape, bool decay, InitKind init,
                                 float init_std) {
    ParamInfo p;
    p.name = std::move(name);
    p.numel = shape_numel(shape);
    p.shape = std::move(shape);
    p.offset = total_;
    p.decay = decay;
    p.init = init;
    p.init_std = init_std;
    total_ += p.numel;
    entries_.push_back(std::move(p));
    return entries_.back();
}

const ParamInfo* ParamTable::find(const std::string& name) const {
    for (const auto& p : entries_)
        if (p.name == name) return &p;
    return nullptr;
}

const ParamInfo& ParamTable::at(const std::string& name) const {
    const ParamInfo* p = find(name);
    TS_CHECK(p != nullptr, "no parameter named '", name, "'");
    return *p;
}

uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

float counter_normal(uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t a = splitmix64(seed ^ splitmix64(stream * 0x100000001B3ull + 0x51ED2701u));
    uint64_t r1 = splitmix64(a ^ (index * 2 + 0));
    uint64_t r2 = splitmix64(a ^ (index * 2 + 1));
    double u1 = ((r1 >> 11) + 1.0) * (1.0 / 9007199254740993.0);  // (0, 1]
    double u2 = (r2 >> 11) * (1.0 / 9007199254740992.0);          // [0, 1)
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

void params_init(const ParamTable& table, uint64_t seed, float* params, int64_t begin,
                 int64_t end) {
    if (end < 0) end = table.total_numel();
    const auto& es = table.entries();
    for (size_t pi = 0; pi < es.size(); ++pi) {
        const ParamInfo& p = es[pi];
        int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.numel);
        if (lo >= hi) continue;
        float* dst = params + (lo - begin);
        int64_t n = hi - lo;
        switch (p.init) {
            case InitKind::zeros:
                for (int64_t i = 0; i < n; ++i) dst[i] = 0.0f;
                break;
            case InitKind::ones:
                for (int64_t i = 0; i < n; ++i) dst[i] = 1.0f;
                break;
            case InitKind::normal:
#pragma omp parallel for
                for (int64_t i = 0; i < n; ++i)
                    dst[i] = p.init_std * counter_normal(seed, pi, (uint64_t)(lo - p.offset + i));
                break;
        }
    }
}

}  // namespace tessera
