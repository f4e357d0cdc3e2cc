// How rotary position embeddings scale their frequencies (a model config's rope_scaling, as
// transformers names it): the config carries it, the kernels apply it (engine/kernels/cpu/rope.h).
#pragma once
#include <string>

namespace tessera {

struct RopeScaling {
    std::string type;  // "" (none) | linear | llama3
    double factor = 1.0;
    double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
    int original_max_position_embeddings = 8192;           // llama3
    bool operator==(const RopeScaling&) const = default;
};

}  // namespace tessera
