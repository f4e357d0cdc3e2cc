#!/usr/bin/env python3
"""Diagnostics for the transformers import: the loss of OUT_DIR/model.safetensors on
OUT_DIR/tokens.bin computed by a plain PyTorch GPT-2 from the raw tensors (Conv1D weights
(in, out) used as stored), to compare with transformers' own and Tessera's."""
import json, math, os, struct, sys
import numpy as np, torch, torch.nn.functional as F
from safetensors.torch import load_file
d = sys.argv[1]
W = load_file(os.path.join(d, "model.safetensors"))
print("tensors:", len(W), sorted(W)[:6])
raw = open(os.path.join(d, "tokens.bin"), "rb").read()
tok = torch.from_numpy(np.frombuffer(raw[1024:], dtype=np.uint16).astype(np.int64))
x_ids, y = tok[:-1][None], tok[1:]
P = lambda n: W.get("transformer." + n, W.get(n))
C, NH = 768, 12
L = 1 + max(int(k.split(".")[2]) for k in W if k.startswith("transformer.h."))
x = P("wte.weight")[x_ids] + P("wpe.weight")[: x_ids.shape[1]]
T = x.shape[1]
for l in range(L):
    p = f"h.{l}."
    a = F.layer_norm(x, (C,), P(p + "ln_1.weight"), P(p + "ln_1.bias"), 1e-5)
    qkv = a @ P(p + "attn.c_attn.weight") + P(p + "attn.c_attn.bias")
    q, k, v = [t.view(1, T, NH, 64).transpose(1, 2) for t in qkv.split(C, 2)]
    y_ = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(1, T, C)
    x = x + y_ @ P(p + "attn.c_proj.weight") + P(p + "attn.c_proj.bias")
    m = F.layer_norm(x, (C,), P(p + "ln_2.weight"), P(p + "ln_2.bias"), 1e-5)
    m = F.gelu(m @ P(p + "mlp.c_fc.weight") + P(p + "mlp.c_fc.bias"), approximate="tanh")
    x = x + m @ P(p + "mlp.c_proj.weight") + P(p + "mlp.c_proj.bias")
x = F.layer_norm(x, (C,), P("ln_f.weight"), P("ln_f.bias"), 1e-5)
head = W.get("lm_head.weight", P("wte.weight"))
print("lm_head tied:", torch.equal(head, P("wte.weight")))
print(f"plain torch loss {F.cross_entropy((x @ head.t())[0], y).item():.6f}")
