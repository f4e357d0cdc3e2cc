// ParamTable: the named parameters of a model laid out in one flat fp32 buffer. The optimizer,
// checkpoints, safetensors import/export and (later) ZeRO sharding all work on this table.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tensor.h"

namespace tessera {

enum class InitKind { normal, zeros, ones };

struct ParamInfo {
    std::string name;  // e.g. "h.0.attn.c_attn.weight"
    Shape shape;
    int64_t offset = 0;  // in elements, into the flat buffer
    int64_t numel = 0;
    bool decay = true;  // AdamW weight decay applies (matrices and embeddings; not biases or LN)
    InitKind init = InitKind::normal;
    float init_std = 0.02f;
};

class ParamTable {
  public:
    const ParamInfo& add(std::string name, Shape shape, bool decay, InitKind init,
                         float init_std = 0.0f);
    const std::vector<ParamInfo>& entries() const { return entries_; }
    const ParamInfo* find(const std::string& name) const;
    const ParamInfo& at(const std::string& name) const;  // throws when absent
    int64_t total_numel() const { return total_; }

  private:
    std::vector<ParamInfo> entries_;
    int64_t total_ = 0;
};

// Fills `params` (the flat buffer of `table`) with the table's initialisation. Element e of
// parameter p gets a value that depends only on (seed, p's index, e): any shard of the buffer
// can be initialised on its own with the same values (ZeRO-3 initialises shards directly).
void params_init(const ParamTable& table, uint64_t seed, float* params, int64_t begin = 0,
                 int64_t end = -1);

// Standard normal from a counter (splitmix64 + Box-Muller); deterministic everywhere.
float counter_normal(uint64_t seed, uint64_t stream, uint64_t index);
uint64_t splitmix64(uint64_t x);

}  // namespace tessera
