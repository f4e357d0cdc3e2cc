// Text generation: temperature, top-k, seeded. GPT from its single-rank model (the whole context
// recomputed per token); the Llama family through the parallel runtime's own layers on one rank,
// CPU or CUDA, with a key/value cache (each token's keys and values computed once).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/gpt.h"
#include "engine/parallel/tp_layers.h"

namespace tessera {

struct SampleOptions {
    int max_new_tokens = 200;
    double temperature = 0.8;  // 0 = greedy
    int top_k = 40;            // 0 = all tokens
    uint64_t seed = 1;
    int stop_token = -1;  // stop when generated (e.g. GPT-2 <|endoftext|>)
    int vocab_limit = 0;  // sample only ids below it (the tokenizer's vocabulary); 0 = all
};

// Continues `prompt` (token ids; an empty prompt starts from token 0 or stop_token) and returns the
// generated ids (without the prompt). The context is the last seq_len tokens.
std::vector<int> sample_tokens(GptModel& model, const std::vector<int>& prompt,
                               const SampleOptions& o);

// A Llama-family model's layers on one rank of `ops`' device, its parameters (laid out as
// shape.param_table(), fp32 on the host) copied there, decoding with a key/value cache of
// shape's seq_len positions.
class LayerDecoder {
  public:
    LayerDecoder(const ModelShape& shape, LayerOps& ops, const std::vector<float>& params);
    ~LayerDecoder();
    // Feeds `ids` (one sequence) at positions pos0 .. pos0 + n: the logits (fp32, the model's
    // vocabulary) of the last one, or of every one with all_rows (n rows of vocab()).
    std::vector<float> feed(const std::vector<int32_t>& ids, int pos0, bool all_rows = false);
    int vocab() const { return shape_.vocab(); }
    int max_len() const { return shape_.llama.seq_len; }

  private:
    ModelShape shape_;
    LayerOps& ops_;
    Tensor params_;  // on the device
    std::vector<std::unique_ptr<Layer>> layers_;
};

// sample_tokens through a LayerDecoder: the prompt in one pass, then one token per pass; stops
// at the cache's length.
std::vector<int> sample_tokens(LayerDecoder& decoder, const std::vector<int>& prompt,
                               const SampleOptions& o);

}  // namespace tessera
