#!/usr/bin/env python3
"""Export all-mpnet-base-v2 (sentence-transformers; Apache-2.0) to ONNX and write the
calibration and evaluation samples, the same sentences as ../all-minilm-l6-v2 (calib:
Python standard-library docstrings; eval: Debian fortunes), tokenized with this model's
own tokenizer.json (8..128 tokens).

    python prepare.py MODEL_DIR OUTDIR [--plain]

MODEL_DIR: the unpacked all-mpnet-base-v2/ folder (model.safetensors, tokenizer.json).
OUTDIR/model.onnx: MPNetModel (no pooler) -> last_hidden_state [batch, sequence, 768];
inputs input_ids, attention_mask (int64, dynamic batch and sequence; MPNet has no token
types), opset 17, torch.onnx (TorchScript exporter), with the relative-position buckets
computed without an intermediate -Inf (finite_buckets; same outputs); --plain: as
transformers writes them."""
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "all-minilm-l6-v2"))
import prepare as minilm  # noqa: E402


def write_samples(tok, sents, d):
    d.mkdir(parents=True, exist_ok=True)
    with open(d.parent / f"{d.name}.txt", "w") as fh:
        for i, s in enumerate(sents):
            ids = np.array([tok.encode(s).ids], dtype=np.int64)
            sd = d / f"{i:04d}"
            sd.mkdir(exist_ok=True)
            np.save(sd / "input_ids.npy", ids)
            np.save(sd / "attention_mask.npy", np.ones_like(ids))
            fh.write(s + "\n")


def finite_buckets():
    """MPNet's relative_position_bucket computes log(|i - j| / 8), -Inf where i = j, and
    then takes the exact bucket there with torch.where: the same buckets come out of
    log(max(|i - j|, 1) / 8), without the -Inf in the exported graph. Exported this way,
    the ONNX model gives the same outputs, and quantizers that check or quantize that float
    path (onnxq's --nan-policy error; onnxruntime's quantize_static, whose model then
    fails in the bucket Gather) see finite values. --plain keeps the original."""
    import math
    import torch
    from transformers.models.mpnet import modeling_mpnet as mm

    def relative_position_bucket(relative_position, num_buckets=32, max_distance=128):
        ret = 0
        n = -relative_position
        num_buckets //= 2
        ret += (n < 0).to(torch.long) * num_buckets
        n = torch.abs(n)
        max_exact = num_buckets // 2
        is_small = n < max_exact
        val_if_large = max_exact + (
            torch.log(n.clamp(min=1).float() / max_exact) / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)).to(torch.long)
        val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
        ret += torch.where(is_small, n, val_if_large)
        return ret

    rp = torch.arange(-300, 300)[None, :]
    assert torch.equal(relative_position_bucket(rp), mm.MPNetEncoder.relative_position_bucket(rp))
    mm.MPNetEncoder.relative_position_bucket = staticmethod(relative_position_bucket)


def export(model_dir, out, plain=False):
    import torch
    from transformers import MPNetModel
    if not plain:
        finite_buckets()

    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = MPNetModel.from_pretrained(model_dir, add_pooling_layer=False,
                                                attn_implementation="eager")

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    m = Enc().eval()
    x = torch.ones(1, 16, dtype=torch.int64) * 5
    dyn = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(m, (x, torch.ones_like(x)), str(out), opset_version=17,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state"], dynamo=False,
                          dynamic_axes={"input_ids": dyn, "attention_mask": dyn,
                                        "last_hidden_state": dyn})


def main():
    plain = "--plain" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--plain"]
    model_dir, out = args[0], Path(args[1])
    out.mkdir(parents=True, exist_ok=True)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(minilm.MAX_TOK)
    if not (out / "model.onnx").exists():
        export(model_dir, out / "model.onnx.tmp", plain)
        os.replace(out / "model.onnx.tmp", out / "model.onnx")
    if not (out / "eval.txt").exists():
        write_samples(tok, minilm.pick(minilm.docstring_sentences(), tok, minilm.N_CALIB), out / "calib")
        write_samples(tok, minilm.pick(minilm.fortune_entries(), tok, minilm.N_EVAL), out / "eval")


if __name__ == "__main__":
    main()
