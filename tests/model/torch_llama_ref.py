#!/usr/bin/python3
"""PyTorch reference for Tessera's Llama-family model (Debian python3-torch, CPU, fp32): the
forward of transformers' LlamaForCausalLM (Qwen2's q/k/v biases, Qwen3's per-head q/k RMSNorm
before the rotation, untied heads) written from the
published architecture — RMSNorm, q/k/v projections, rotate-half rotary embeddings with the
default / linear / llama3 inverse frequencies, grouped-query causal attention (repeat_kv), the
output projection, SiLU-gated MLP, final RMSNorm, the head — then the mean cross-entropy and
autograd. Tessera's fused tensors are split here into Hugging Face's: qkv_proj rows are q, k, v;
gate_up_proj rows are gate, up.

usage: torch_llama_ref.py IN.safetensors OUT.safetensors
IN: the parameters under Tessera's names, "inputs", "targets" (B, T) and a "config" JSON; OUT:
"loss" and "grad.<name>" for every parameter.
"""
import json, math, sys
import torch
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_ref import st_read, st_write
from torch_llama_ops import inv_freq, rope

def rmsnorm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

def llama_loss(params, inputs, targets, c):
    """The mean next-token cross-entropy of the (B, T) inputs against the targets."""
    inputs, targets = inputs.long(), targets.long()
    B, T = inputs.shape
    NH, KV, hd, F, eps = c["n_head"], c["n_kv_head"], c["head_dim"], c["ffn"], c["norm_eps"]
    inv = inv_freq(hd, c["rope_theta"], c["rope_scaling"])
    h = params["model.embed_tokens.weight"][inputs]
    for l in range(c["n_layer"]):
        p = f"model.layers.{l}."
        x = rmsnorm(h, params[p + "input_layernorm.weight"], eps)
        W = params[p + "self_attn.qkv_proj.weight"]
        Wq, Wk, Wv = W[: NH * hd], W[NH * hd: (NH + KV) * hd], W[(NH + KV) * hd:]
        q, k, v = x @ Wq.T, x @ Wk.T, x @ Wv.T
        if c["qkv_bias"]:
            b = params[p + "self_attn.qkv_proj.bias"]
            q, k, v = q + b[: NH * hd], k + b[NH * hd: (NH + KV) * hd], v + b[(NH + KV) * hd:]
        q, k = q.view(B, T, NH, hd), k.view(B, T, KV, hd)
        if c.get("qk_norm"):  # Qwen3: RMSNorm over each head's hd, one weight for all heads
            q = rmsnorm(q, params[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, params[p + "self_attn.k_norm.weight"], eps)
        q = rope(q, inv, T).transpose(1, 2)
        k = rope(k, inv, T).transpose(1, 2).repeat_interleave(NH // KV, dim=1)
        v = v.view(B, T, KV, hd).transpose(1, 2).repeat_interleave(NH // KV, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        a = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, NH * hd)
        h = h + a @ params[p + "self_attn.o_proj.weight"].T
        x = rmsnorm(h, params[p + "post_attention_layernorm.weight"], eps)
        G = params[p + "mlp.gate_up_proj.weight"]
        m = torch.nn.functional.silu(x @ G[:F].T) * (x @ G[F:].T)
        h = h + m @ params[p + "mlp.down_proj.weight"].T
    h = rmsnorm(h, params["model.norm.weight"], eps)
    head = params["model.embed_tokens.weight"] if c["tie_embeddings"] else params["lm_head.weight"]
    logits = h @ head.T
    return torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))

def main():
    t, meta = st_read(sys.argv[1])
    c = json.loads(meta["config"])
    inputs, targets = t.pop("inputs"), t.pop("targets")
    params = {k: v.clone().requires_grad_() for k, v in t.items()}
    loss = llama_loss(params, inputs, targets, c)
    loss.backward()
    out = {"loss": loss.detach().reshape(1)}
    for k, v in params.items(): out["grad." + k] = v.grad
    st_write(sys.argv[2], out)

if __name__ == "__main__":
    main()
