// Softmax + cross-entropy over a vocab-parallel shard of the logits, on the GPU:
//   ce_row_stats_cuda    one online pass: the shard's row max, sum of exponentials, target term
//   (tensor parallel only: all-reduce(max) a copy of rowmax, ce_rescale_cuda, all-reduce(sum)
//    sumexp and target_term)
//   ce_loss_and_grad_cuda (training: logits become dlogits in place) or ce_loss_only_cuda (eval).
// Training over the whole vocabulary (no tensor parallelism): ce_train_cuda, one pass.
// With one shard (v0 = 0, V = full vocab) this is engine/kernels/cpu/cross_entropy.h's
// forward + backward. logits (N, V) are this rank's columns [v0, v0 + V) of the vocabulary.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace tessera {

// rowmax (N) = max over this shard of logits (N, V); sumexp (N) = sum over the shard of
// exp(logit - rowmax); target_term (N) = exp(logit[t] - rowmax) when t = targets[n] is in
// [v0, v0 + V), else 0 (targets < 0 are ignored). One pass over the logits.
template <typename T>
void ce_row_stats_cuda(float* rowmax, float* sumexp, float* target_term, const T* logits,
                       const int* targets, long v0, int N, int V, cudaStream_t s, int ld = 0);

// Tensor parallel: gmax (N) is the all-reduced maximum of every shard's rowmax. Rescales this
// shard's sumexp and target_term to it (times exp(rowmax - gmax)) and sets rowmax = gmax; the
// two sums are then all-reduced.
void ce_rescale_cuda(float* rowmax, float* sumexp, float* target_term, const float* gmax, int N,
                     cudaStream_t s);

// losses (N) = -log(target_term / sumexp), 0 for ignored rows (losses may be null); logits (N, V)
// are overwritten in place with dlogits = (softmax - onehot(target)) * dloss, 0 for ignored rows.
// rowmax, sumexp, target_term are the global (all-reduced) values.
template <typename T>
void ce_loss_and_grad_cuda(float* losses, T* logits, const float* rowmax, const float* sumexp,
                           const float* target_term, const int* targets, long v0, float dloss,
                           int N, int V, cudaStream_t s, int ld = 0);

// ld: the row stride of logits (0 = V). The GPU head pads its vocabulary shard to a multiple of
// 128 columns (fast GEMMs); columns [V, ld) are padding, ignored, and zeroed in the gradient.

// Training over the whole vocabulary (v0 = 0, V columns of rows ld apart): losses (N, may be
// null) and the gradient in place, as ce_row_stats_cuda + ce_loss_and_grad_cuda give them, in one
// read of the logits where the rows take 16-byte accesses and a row fits the shared memory of a
// cluster of blocks (bf16 up to 196,608 columns, fp32 half that); elsewhere those two passes, with
// stats (3, N) as their scratch.
template <typename T>
void ce_train_cuda(float* losses, float* stats, T* logits, const int* targets, float dloss, int N,
                   int V, cudaStream_t s, int ld = 0);

// Eval: losses (N) as above, no gradient.
void ce_loss_only_cuda(float* losses, const float* sumexp, const float* target_term,
                       const int* targets, int N, cudaStream_t s);

}  // namespace tessera
