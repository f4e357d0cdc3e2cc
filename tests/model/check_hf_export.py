#!/usr/bin/env python3
"""Loads a folder written by `tessera export --hf` with transformers (AutoModelForCausalLM, fp32,
eager attention) and prints, as one JSON line, its mean next-token loss over a fixed window of
tokens: each row's inputs are all its tokens but the last, its targets the same shifted by one
(as Tessera computes it: tests/support/token_loss.h).

    python3 tests/model/check_hf_export.py FOLDER TOKENS [--device cpu|cuda] [--tolerance 1e-4]

TOKENS is JSON, a list of rows or {"tokens": [[...], ...], "loss": L}, or text with one row of
whitespace-separated ids per line; the rows have one length. When the file carries Tessera's loss
("loss", as tokens.json from tests/cli/export_test.cpp with TESSERA_HF_CHECK_DIR=DIR does; the
fixtures in tests/model/data/hf carry transformers' own), the output adds it and the difference,
and the exit code is 1 when they differ by more than the tolerance.

When the token file also carries "text" and "text_ids" (Tessera's encoding of the text with the
run's tokenizer, no BOS/EOS) and the folder holds a tokenizer (tokenizer.json, or GPT-2's
vocab.json and merges.txt, which `tessera export --hf` writes beside the weights), the folder's
tokenizer is loaded with AutoTokenizer and must encode the text to the same ids (exit 1 if not).

The load must be complete: a tensor transformers expected and did not find (it would be left at
its random initialisation), one it did not expect, or one of another shape is an error (exit 2),
as is a model class other than the one config.json names. Needs torch and transformers (the GPU
machine has transformers 5.17); the token file is read and checked before they are imported.

    TESSERA_HF_CHECK_DIR=/tmp/hf build/bin/cli_export_test
    for d in /tmp/hf/*/; do python3 tests/model/check_hf_export.py $d $d/tokens.json; done
"""
import argparse
import json
import math
import os
import sys


def read_tokens(path):
    """(rows, expected loss or None) from a token file; ValueError saying what is wrong."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    expected = None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [[int(x) for x in line.split()] for line in text.splitlines() if line.strip()]
        except ValueError as e:
            raise ValueError(f"{path}: neither JSON nor rows of integer ids ({e})") from None
    if isinstance(data, dict):
        if "tokens" not in data:
            raise ValueError(f"{path}: expected a \"tokens\" key beside {sorted(data)}")
        expected = data.get("loss")
        if expected is not None and not isinstance(expected, (int, float)):
            raise ValueError(f"{path}: \"loss\": expected a number, found {expected!r}")
        data = data["tokens"]
    if not isinstance(data, list) or not data or not all(isinstance(r, list) for r in data):
        raise ValueError(f"{path}: expected a non-empty list of rows of token ids")
    lengths = sorted({len(r) for r in data})
    if len(lengths) != 1 or lengths[0] < 2:
        raise ValueError(f"{path}: expected rows of one length, at least 2 tokens, found lengths {lengths}")
    for i, r in enumerate(data):
        for t in r:
            if not isinstance(t, int) or isinstance(t, bool) or t < 0:
                raise ValueError(f"{path}: row {i}: expected non-negative integer ids, found {t!r}")
    return data, (float(expected) if expected is not None else None)


def check_vocab(rows, vocab_size, path):
    top = max(max(r) for r in rows)
    if top >= vocab_size:
        raise ValueError(f"{path}: token id {top} is outside the model's vocab_size {vocab_size}")


def compare(result, expected, tolerance):
    """Adds Tessera's loss and the difference to `result`; True when within the tolerance."""
    if expected is None:
        return True
    result["tessera_loss"] = expected
    result["difference"] = result["loss"] - expected
    result["tolerance"] = tolerance
    return math.isfinite(result["loss"]) and abs(result["difference"]) <= tolerance


def load_model(folder, device):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    major = int(transformers.__version__.split(".")[0])
    dtype_key = "dtype" if major >= 5 else "torch_dtype"  # 4.x spelling
    model, info = AutoModelForCausalLM.from_pretrained(
        folder, **{dtype_key: torch.float32}, attn_implementation="eager", output_loading_info=True)
    problems = {k: sorted(str(x) for x in v) for k, v in info.items()
                if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if problems:
        raise ValueError(f"{folder}: transformers did not load every tensor as written: {problems}")
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        named = json.load(f).get("architectures", [None])[0]
    if type(model).__name__ != named:
        raise ValueError(f"{folder}: config.json names {named}, transformers built {type(model).__name__}")
    return model.to(device).eval(), transformers.__version__


def read_text_ids(path):
    """(text, ids) from a token file that carries them, else (None, None)."""
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError:
            return None, None
    if not isinstance(data, dict) or "text" not in data:
        return None, None
    ids = data.get("text_ids")
    if not isinstance(data["text"], str) or not isinstance(ids, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in ids):
        raise ValueError(f"{path}: \"text\" must be a string and \"text_ids\" a list of integer ids")
    return data["text"], ids


def has_tokenizer(folder):
    return os.path.exists(os.path.join(folder, "tokenizer.json")) or (
        os.path.exists(os.path.join(folder, "vocab.json")) and os.path.exists(os.path.join(folder, "merges.txt")))


def tokenizer_ids(folder, text):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    return type(tok).__name__, tok(text, add_special_tokens=False)["input_ids"]


def model_loss(model, rows, device):
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 products, as Tessera's CPU reference
    torch.backends.cudnn.allow_tf32 = False
    tokens = torch.tensor(rows, dtype=torch.long, device=device)
    with torch.no_grad():
        logits = model(input_ids=tokens[:, :-1]).logits.float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)).item()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", help="a folder written by `tessera export --hf`")
    p.add_argument("tokens", help="token file: JSON rows, {\"tokens\": rows, \"loss\": L}, or text")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--tolerance", type=float, default=1e-4, help="largest |loss - tessera_loss| (default 1e-4)")
    a = p.parse_args(argv)
    try:
        rows, expected = read_tokens(a.tokens)
        with open(os.path.join(a.folder, "config.json"), encoding="utf-8") as f:
            check_vocab(rows, json.load(f)["vocab_size"], a.tokens)
        model, version = load_model(a.folder, a.device)
        import torch
        result = {"loss": model_loss(model, rows, a.device), "architecture": type(model).__name__,
                  "tokens": [len(rows), len(rows[0]) - 1], "transformers": version, "torch": torch.__version__,
                  "device": a.device}
        text, text_ids = read_text_ids(a.tokens)
        if text is not None and not has_tokenizer(a.folder):
            raise ValueError(f"{a.tokens} carries a text to encode but {a.folder} holds no tokenizer")
        if text is not None:
            result["tokenizer"], ids = tokenizer_ids(a.folder, text)
            result["tokenizer_same_ids"] = ids == text_ids
    except (OSError, ValueError, KeyError, ImportError) as e:
        print(json.dumps({"error": str(e)}))
        return 2
    ok = compare(result, expected, a.tolerance) and result.get("tokenizer_same_ids", True)
    print(json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
