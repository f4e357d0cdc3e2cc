// Text generation from a trained GPT: temperature, top-k, seeded.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/gpt.h"

namespace tessera {

struct SampleOptions {
    int max_new_tokens = 200;
    double temperature = 0.8;  // 0 = greedy
    int top_k = 40;            // 0 = all tokens
    uint64_t seed = 1;
    int stop_token = -1;       // stop when generated (e.g. GPT-2 <|endoftext|>)
};

// Continues `prompt` (token ids; an empty prompt starts from token 0 or stop_token) and returns the
// generated ids (without the prompt). The context is the last seq_len tokens.
std::vector<int> sample_tokens(GptModel& model, const std::vector<int>& prompt,
                               const SampleOptions& o);

}  // namespace tessera
