#include "engine/kernels/cpu/cross_entropy.h"

#include <cmath>

namespace tessera {

void cross_entropy_forward(float* losses, float* logits, const int32_t* targets, int N, int V) {
#pragma omp parallel for
    for (int n = 0; n < N; ++n) {
        float* row = logits + (long)n * V;
        float maxv = row[0];
        for (int i = 1; i < V; ++i) maxv = row[i] > maxv ? row[i] : maxv;
        float sum = 0.0f;
        for (int i = 0; i < V; ++i) {
            row[i] = std::exp(row[i] - maxv);
            sum += row[i];
        }
        float inv = 1.0f / sum;
        for (int i = 0; i < V; ++i) row[i] *= inv;
        int t = targets[n];
        losses[n] = t >= 0 ? -std::log(row[t]) : 0.0f;
    }
}

void cross_entropy_backward(float* probs, const int32_t* targets, float dloss, int N, int V) {
#pragma omp parallel for
    for (int n = 0; n < N; ++n) {
        float* row = probs + (long)n * V;
        int t = targets[n];
        if (t < 0) {
            for (int i = 0; i < V; ++i) row[i] = 0.0f;
            continue;
        }
        for (int i = 0; i < V; ++i) row[i] *= dloss;
        row[t] -= dloss;
    }
}

int64_t count_correct(const float* scores, const int32_t* targets, int N, int V) {
    int64_t correct = 0;
    for (int n = 0; n < N; ++n) {
        const float* row = scores + (int64_t)n * V;
        int best = 0;
        for (int v = 1; v < V; ++v)
            if (row[v] > row[best]) best = v;
        correct += best == targets[n];
    }
    return correct;
}

}  // namespace tessera
