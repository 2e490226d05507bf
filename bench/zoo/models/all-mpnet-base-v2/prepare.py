#!/usr/bin/env python3
"""Export all-mpnet-base-v2 (sentence-transformers; Apache-2.0) to ONNX and write the
calibration and evaluation samples, the same sentences as ../all-minilm-l6-v2 (calib:
Python standard-library docstrings; eval: Debian fortunes), tokenized with this model's
own tokenizer.json (8..128 tokens).

    python prepare.py MODEL_DIR OUTDIR

MODEL_DIR: the unpacked all-mpnet-base-v2/ folder (model.safetensors, tokenizer.json).
OUTDIR/model.onnx: MPNetModel (no pooler) -> last_hidden_state [batch, sequence, 768];
inputs input_ids, attention_mask (int64, dynamic batch and sequence; MPNet has no token
types), opset 17, torch.onnx (TorchScript exporter)."""
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


def export(model_dir, out):
    import torch
    from transformers import MPNetModel

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
    model_dir, out = sys.argv[1], Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(minilm.MAX_TOK)
    if not (out / "model.onnx").exists():
        export(model_dir, out / "model.onnx.tmp")
        os.replace(out / "model.onnx.tmp", out / "model.onnx")
    if not (out / "eval.txt").exists():
        write_samples(tok, minilm.pick(minilm.docstring_sentences(), tok, minilm.N_CALIB), out / "calib")
        write_samples(tok, minilm.pick(minilm.fortune_entries(), tok, minilm.N_EVAL), out / "eval")


if __name__ == "__main__":
    main()
