// Softmax + cross-entropy over the vocabulary, fused, forward and backward.
#pragma once
#include <cstdint>

namespace tessera {

// logits (N, V) are replaced by probabilities in place; losses (N) = -log p[target];
// targets (N) are token ids; a target < 0 is ignored (loss 0, no gradient).
void cross_entropy_forward(float* losses, float* logits, const int32_t* targets, int N, int V);
// In place: probs (N, V) become dlogits = (probs - onehot(target)) * dloss; dloss is one scalar
// (e.g. 1 / (tokens in the global batch)).
void cross_entropy_backward(float* probs, const int32_t* targets, float dloss, int N, int V);
// Rows of scores (N, V) whose largest entry (the first, on ties) is at their target.
int64_t count_correct(const float* scores, const int32_t* targets, int N, int V);

}  // namespace tessera
