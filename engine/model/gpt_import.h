// GPT-2 weights from safetensors: Tessera's own names, or Hugging Face GPT-2 names
// ("transformer.h.0.attn.c_attn.weight", Conv1D weights stored (in, out) and transposed here;
// "lm_head.weight" tied to wte and ignored; attention mask buffers ignored).
#pragma once
#include "engine/io/safetensors.h"
#include "engine/model/gpt.h"

namespace tessera {

// Architecture read from tensor shapes: n_layer from the highest block index, d_model and vocab
// from wte, seq_len from wpe. Shapes do not carry the head count: n_head is taken from the
// file's metadata "n_head" when present, else d_model / 64 (the GPT-2 family's head size).
GptDims gpt_dims_from_safetensors(const SafetensorsFile& f);

// Copies every parameter of `model` from `f` (fp32/bf16/fp16 accepted). InputError naming the
// file and the tensor for a missing tensor or a shape that differs.
void gpt_load_weights(GptModel& model, const SafetensorsFile& f);

}  // namespace tessera
