#!/usr/bin/python3
"""PyTorch reference for Tessera's model tests (Debian python3-torch, CPU, fp32).

usage: torch_ref.py gpt|mlp|llama IN.safetensors OUT.safetensors (llama: torch_llama_ref.py's
forward, its config in the hyper JSON)

IN holds the model's parameters under Tessera's names, the batches ("inputs.<k>",
"targets.<k>" or "features.<k>") and a "hyper" metadata JSON. OUT receives, computed by PyTorch:
"loss0" (loss of batch 0 with the initial weights), "grad.<param>" (its gradients), and
"losses" (the loss before each of `steps` AdamW steps, one batch per step, with the same
clipping and learning-rate schedule), and "final.<param>" (parameters after those steps).
"""
import json, math, struct, sys
import numpy as np
import torch
import torch.nn.functional as F

DT = {"F32": np.float32, "I32": np.int32, "U16": np.uint16, "BF16": None, "U8": np.uint8}

def st_read(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, en = e["data_offsets"]
        arr = np.frombuffer(raw[8 + n + b: 8 + n + en], dtype=DT[e["dtype"]]).reshape(e["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, meta

def st_write(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata: header["__metadata__"] = metadata
    for name, t in tensors.items():
        a = t.detach().contiguous().numpy().astype(np.float32)
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b); off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h)
        for b in blobs: f.write(b)

def lr_at(h, step):
    if step < h["warmup_steps"]:
        return h["lr"] * (step + 1) / h["warmup_steps"]
    decay = h["steps"] - h["warmup_steps"]
    if decay <= 0: return h["lr"]
    r = min(1.0, (step - h["warmup_steps"]) / decay)
    return h["min_lr"] + 0.5 * (1 + math.cos(math.pi * r)) * (h["lr"] - h["min_lr"])

def gpt_loss(P, idx, tgt, h):
    B, T = idx.shape
    C, NH, L = h["d_model"], h["n_head"], h["n_layer"]
    x = P["wte.weight"][idx.long()] + P["wpe.weight"][:T]
    for l in range(L):
        p = f"h.{l}."
        a = F.layer_norm(x, (C,), P[p + "ln_1.weight"], P[p + "ln_1.bias"], 1e-5)
        qkv = F.linear(a, P[p + "attn.c_attn.weight"], P[p + "attn.c_attn.bias"])
        q, k, v = qkv.split(C, dim=2)
        q, k, v = [t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
        att = att.masked_fill(torch.ones(T, T).tril() == 0, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, P[p + "attn.c_proj.weight"], P[p + "attn.c_proj.bias"])
        m = F.layer_norm(x, (C,), P[p + "ln_2.weight"], P[p + "ln_2.bias"], 1e-5)
        m = F.gelu(F.linear(m, P[p + "mlp.c_fc.weight"], P[p + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(m, P[p + "mlp.c_proj.weight"], P[p + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], 1e-5)
    logits = x @ P["wte.weight"].t()
    return F.cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1).long())

def mlp_loss(P, feats, tgt, h):
    x = feats
    n = h["n_linear"]
    for i in range(n):
        x = F.linear(x, P[f"fc.{i}.weight"], P[f"fc.{i}.bias"])
        if i + 1 < n: x = F.relu(x)
    return F.cross_entropy(x, tgt.long())

def hf_export(inp, outp):
    """Writes the parameters in Hugging Face GPT2LMHeadModel's layout: "transformer." names,
    Conv1D weights stored (in, out), the tied lm_head.weight and the causal-mask buffers."""
    T, meta = st_read(inp)
    h = json.loads(meta["hyper"])
    out = {}
    for n in json.loads(meta["params"]):
        t = T[n]
        if n.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight")):
            t = t.t().contiguous()
        out["transformer." + n] = t
    out["lm_head.weight"] = T["wte.weight"]
    S = T["wpe.weight"].shape[0]
    for l in range(h["n_layer"]):
        out[f"transformer.h.{l}.attn.bias"] = torch.ones(S, S).tril().view(1, 1, S, S)
    st_write(outp, out, {"format": "pt", "n_head": str(h["n_head"])})

def main():
    kind, inp, outp = sys.argv[1:4]
    if kind == "hf-export":
        return hf_export(inp, outp)
    T, meta = st_read(inp)
    h = json.loads(meta["hyper"])
    names = json.loads(meta["params"])
    P = {n: T[n].clone().requires_grad_(True) for n in names}
    if kind == "llama":
        sys.path.insert(0, __file__.rsplit("/", 1)[0])
        from torch_llama_ref import llama_loss
        lossf = llama_loss
    else:
        lossf = gpt_loss if kind == "gpt" else mlp_loss
    def batch(k):
        x = T[f"inputs.{k}"] if kind != "mlp" else T[f"features.{k}"]
        return x, T[f"targets.{k}"]
    out = {}
    x, y = batch(0)
    loss = lossf(P, x, y, h)
    loss.backward()
    out["loss0"] = loss.detach().reshape(1)
    for n in names:
        out["grad." + n] = P[n].grad.clone()
    # training: decay only on tensors Tessera decays (metadata "decay")
    decay = set(json.loads(meta["decay"]))
    groups = [{"params": [P[n] for n in names if n in decay], "weight_decay": h["weight_decay"]},
              {"params": [P[n] for n in names if n not in decay], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"],
                            foreach=False)
    losses = []
    for step in range(h["steps"]):
        for g in opt.param_groups: g["lr"] = lr_at(h, step)
        opt.zero_grad(set_to_none=True)
        x, y = batch(step)
        loss = lossf(P, x, y, h)
        loss.backward()
        if h["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_([P[n] for n in names], h["grad_clip"])
        opt.step()
        losses.append(loss.item())
    out["losses"] = torch.tensor(losses, dtype=torch.float32)
    for n in names:
        out["final." + n] = P[n].detach()
    st_write(outp, out)

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    main()
