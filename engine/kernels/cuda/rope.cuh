// Rotary position embeddings on the GPU, in place, in the layout Hugging Face stores q and k in
// (rotate-half: dimension j pairs with j + hd/2); same math as engine/kernels/cpu/rope.h. T is
// float or bf16; the rotation is computed in fp32.
#pragma once
#include <cuda_runtime.h>

namespace tessera {

// `heads` heads of width hd at the start of each of the B·T_ rows of x (row stride `stride`
// elements), row r at position pos0 + r % T_, rotated by the angles position · inv_freq[j] (hd/2
// fp32 on the device); inverse: by minus them (the backward).
template <typename T>
void rope_cuda(T* x, int B, int T_, int heads, int hd, long stride, const float* inv_freq,
               bool inverse, cudaStream_t s, int pos0 = 0);

}  // namespace tessera
