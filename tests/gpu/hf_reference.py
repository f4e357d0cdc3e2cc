#!/usr/bin/env python3
"""Writes a GPT-2 checkpoint with transformers (GPT2LMHeadModel, random init from config,
save_pretrained) and its own fp32 loss on a fixed window of token ids.
usage: hf_reference.py OUT_DIR N_LAYER
OUT_DIR/model.safetensors, OUT_DIR/tokens.bin (llm.c shard of 1025 tokens), OUT_DIR/loss.txt"""
import os, struct, sys
import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel

out, n_layer = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
# a wide initialisation makes the logits peaked, so any misplaced weight moves the loss far
cfg = GPT2Config(n_layer=n_layer, n_head=12, n_embd=768, n_positions=1024, vocab_size=50257,
                 initializer_range=0.2)
model = GPT2LMHeadModel(cfg).eval()
model.save_pretrained(out, safe_serialization=True)
g = torch.Generator().manual_seed(1)
tokens = torch.randint(0, 50257, (1025,), generator=g)
with open(os.path.join(out, "tokens.bin"), "wb") as f:
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, tokens.numel()
    f.write(header.tobytes())
    f.write(tokens.numpy().astype(np.uint16).tobytes())
with torch.no_grad():
    loss = model(tokens[None, :-1], labels=tokens[None, :-1]).loss  # HF shifts the labels
# HF's loss over 1023 positions of a 1024 window; Tessera's over 1024 targets (the window's next
# token included): compute the exact same 1024-target loss from the logits instead.
with torch.no_grad():
    logits = model(tokens[None, :-1]).logits[0].float()
    loss = torch.nn.functional.cross_entropy(logits, tokens[1:])
open(os.path.join(out, "loss.txt"), "w").write(f"{loss.item():.8f}\n")
print(f"transformers fp32 loss {loss.item():.6f}")
