#!/usr/bin/python3
"""PyTorch reference for the Llama family's ops (Debian python3-torch, CPU, fp32), written from
the published architecture (transformers' LlamaRMSNorm, LlamaMLP, apply_rotary_pos_emb with
rotate_half, the default / linear / llama3 inverse frequencies, repeat_kv attention), not from
Tessera's code.

usage: torch_llama_ops.py IN.safetensors OUT.safetensors

IN holds each op's inputs and the gradient of its output ("<op>.x", "<op>.dout", ...) and a
"cases" metadata JSON with the sizes; OUT gets "<op>.out" and "<op>.d<input>" from autograd.
"""
import json, math, sys
import torch
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_ref import st_read, st_write

def inv_freq(hd, theta, scaling):
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    kind = scaling.get("type", "")
    if kind == "linear":
        inv = inv / scaling["factor"]
    elif kind == "llama3":
        factor, lo, hi = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / inv
        llama = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * llama / factor + smooth * llama
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv = torch.where(medium, smoothed, llama)
    return inv

def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)

def rope(x, inv, T):  # x (B, T, H, hd)
    pos = torch.arange(T).float()
    freqs = pos[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    return x * cos + rotate_half(x) * sin

def main():
    t, meta = st_read(sys.argv[1])
    cases = json.loads(meta["cases"])
    out = {}
    def grads(name, inputs, y):
        y.backward(t[name + ".dout"])
        out[name + ".out"] = y
        for k, v in inputs.items(): out[name + ".d" + k] = v.grad
    for name, c in cases.items():
        kind = c["kind"]
        if kind == "rmsnorm":
            x = t[name + ".x"].requires_grad_(); w = t[name + ".w"].requires_grad_()
            var = x.pow(2).mean(-1, keepdim=True)
            grads(name, {"x": x, "w": w}, w * (x * torch.rsqrt(var + c["eps"])))
        elif kind == "swiglu":
            g = t[name + ".gate"].requires_grad_(); u = t[name + ".up"].requires_grad_()
            grads(name, {"gate": g, "up": u}, torch.nn.functional.silu(g) * u)
        elif kind == "rope":
            x = t[name + ".x"].requires_grad_()
            inv = inv_freq(c["hd"], c["theta"], c.get("scaling", {}))
            out[name + ".inv_freq"] = inv
            grads(name, {"x": x}, rope(x, inv, c["T"]))
        elif kind == "attention":
            B, T, NH, KV, hd = c["B"], c["T"], c["NH"], c["KV"], c["hd"]
            q = t[name + ".q"].requires_grad_(); k = t[name + ".k"].requires_grad_(); v = t[name + ".v"].requires_grad_()
            qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, hd)
            kh = kh.repeat_interleave(NH // KV, dim=1); vh = vh.repeat_interleave(NH // KV, dim=1)
            s = qh @ kh.transpose(-1, -2) / math.sqrt(hd)
            s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
            y = (torch.softmax(s, dim=-1) @ vh).transpose(1, 2).reshape(B, T, NH * hd)
            grads(name, {"q": q, "k": k, "v": v}, y)
    st_write(sys.argv[2], out)

if __name__ == "__main__":
    main()
