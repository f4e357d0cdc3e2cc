// Rotary position embeddings in the layout Hugging Face stores q and k in (rotate-half: element i
// of a head pairs with element i + hd/2), with the inverse frequencies of `rope_theta` and the
// optional scaling of the config (linear; llama3's wavelength bands).
#pragma once
#include <string>
#include <vector>

#include "engine/core/rope_scaling.h"

namespace tessera {

// The hd/2 inverse frequencies theta^(−2j/hd), scaled as transformers scales them.
std::vector<float> rope_inv_freq(int hd, float theta, const RopeScaling& scaling);
// Rotates, in place, `heads` heads of width hd in each of B·T rows of x (row stride `stride`
// floats, the heads back to back from the row's start) by position t = pos0 + row % T (pos0:
// where cached decoding's new tokens start); `inverse` rotates back (the backward: the gradient
// rotates by the opposite angle).
void rope_apply(float* x, int B, int T, int heads, int hd, long stride,
                const std::vector<float>& inv_freq, bool inverse, int pos0 = 0);

}  // namespace tessera
