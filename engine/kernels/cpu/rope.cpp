#include "engine/kernels/cpu/rope.h"

#include <cmath>

namespace tessera {

std::vector<float> rope_inv_freq(int hd, float theta, const RopeScaling& s) {
    std::vector<float> inv(hd / 2);
    for (int j = 0; j < hd / 2; ++j) inv[j] = 1.0f / std::pow(theta, (float)(2 * j) / (float)hd);
    if (s.type == "linear") {
        for (float& f : inv) f /= (float)s.factor;
    } else if (s.type == "llama3") {
        // keep the high frequencies, divide the low ones by factor, interpolate in between
        const float old_len = (float)s.original_max_position_embeddings;
        const float lo = (float)s.low_freq_factor, hi = (float)s.high_freq_factor,
                    factor = (float)s.factor;
        const float low_wavelen = old_len / lo, high_wavelen = old_len / hi;
        const float pi = 3.14159265358979323846f;
        for (float& f : inv) {
            const float wavelen = 2.0f * pi / f;
            float scaled = wavelen > low_wavelen ? f / factor : f;
            if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
                const float smooth = (old_len / wavelen - lo) / (hi - lo);
                scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
            }
            f = scaled;
        }
    }
    return inv;
}

void rope_apply(float* x, int B, int T, int heads, int hd, long stride,
                const std::vector<float>& inv_freq, bool inverse, int pos0) {
    const int half = hd / 2;
#pragma omp parallel for
    for (long row = 0; row < (long)B * T; ++row) {
        const float t = (float)(pos0 + row % T);
        float* r = x + row * stride;
        for (int j = 0; j < half; ++j) {
            const float angle = t * inv_freq[j];
            const float c = std::cos(angle), s = inverse ? -std::sin(angle) : std::sin(angle);
            for (int h = 0; h < heads; ++h) {
                float* p = r + (long)h * hd;
                const float a = p[j], b = p[j + half];
                p[j] = a * c - b * s;
                p[j + half] = b * c + a * s;
            }
        }
    }
}

}  // namespace tessera
