// The estimator tests' small GPT: 8 blocks of width 32 (4 heads of 8), sequences of 16, micro-batch
// 2, two micro-batches per step, bytes vocabulary; `sets` as `--set` overrides.
#pragma once
#include <string>
#include <vector>

#include "engine/config/config.h"

namespace tessera::test {

inline RunConfig tiny_plan(const std::vector<std::string>& sets = {}) {
    static const char* kTiny = R"(name: t
model: {preset: gpt-tiny, n_layer: 8, n_head: 4, d_model: 32, seq_len: 16}
data: {dataset: brown}
train: {steps: 3, micro_batch: 2, grad_accum: 2, eval_every: 0}
)";
    return config_parse(kTiny, "tiny.yaml", sets);
}

}  // namespace tessera::test
