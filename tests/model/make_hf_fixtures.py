#!/usr/bin/env python3
"""Writes tests/model/data/hf/<name>/: a tiny random Hugging Face model saved by transformers
itself (config.json + model.safetensors, or shards with model.safetensors.index.json), and
fixture.json with a fixed window of tokens and transformers' fp32 loss over it (labels = the
inputs, shifted inside the model). Run where transformers is installed (the GPU machine; it runs
on the CPU there):

    python3 tests/model/make_hf_fixtures.py tests/model/data/hf

tests/model/hf_fixture_test.cpp loads each folder through model.init_from and holds Tessera's
loss to this one within 1e-4.
"""
import json, os, sys
import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

out = sys.argv[1]
torch.manual_seed(0)
common = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              rms_norm_eps=1e-5, initializer_range=0.2)
cases = {
    "llama3_tied": (LlamaConfig, LlamaForCausalLM,
                    dict(tie_word_embeddings=True, rope_theta=500.0,
                         rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8}), None),
    "mistral_sharded": (MistralConfig, MistralForCausalLM,
                        dict(tie_word_embeddings=False, rope_theta=10000.0, sliding_window=None), "20KB"),
    "qwen2_bias": (Qwen2Config, Qwen2ForCausalLM,
                   dict(tie_word_embeddings=True, rope_theta=1e6, num_key_value_heads=1), None),
    # Qwen3: per-head q/k RMSNorm, a head_dim that is not hidden / heads, untied
    "qwen3_qknorm": (Qwen3Config, Qwen3ForCausalLM,
                     dict(tie_word_embeddings=False, rope_theta=1e6, head_dim=16, attention_bias=False), None),
}
for name, (Cfg, Model, extra, shard) in cases.items():
    kw = dict(common); kw.update(extra)
    cfg = Cfg(**kw)
    model = Model(cfg).float().eval()
    with torch.no_grad():  # the biases start at zero and the q/k norms at one: give them values
        for n, p in model.named_parameters():
            if n.endswith("bias"): p.normal_(0.0, 0.2)
            if n.endswith("q_norm.weight") or n.endswith("k_norm.weight"): p.normal_(1.0, 0.2)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    if shard: model.save_pretrained(d, safe_serialization=True, max_shard_size=shard)
    else: model.save_pretrained(d, safe_serialization=True)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, cfg.vocab_size, (2, 17), generator=g)
    with torch.no_grad():
        loss = model(input_ids=tokens, labels=tokens).loss.item()
    json.dump({"produced_by": f"tests/model/make_hf_fixtures.py with transformers {transformers.__version__}, "
                              f"torch {torch.__version__} (CPU, fp32)",
               "architecture": Model.__name__, "tokens": tokens.tolist(), "loss": loss},
              open(os.path.join(d, "fixture.json"), "w"), indent=1)
    print(name, Model.__name__, "loss", loss, sorted(os.listdir(d)))
