#!/usr/bin/env python3
"""Checks that onnxruntime reproduces PyTorch's outputs of the exported transformer.

    "$(bash .ci/venv.sh)/bin/python" models/check_transformer_ort.py \
        models/text_transformer.onnx /tmp/text_transformer.torch_eval.npz

The .npz is what models/make_transformer.py --ref writes: the eval tokens and torch's
logits and embedding for them. Runs onnxruntime (graph optimizations on and off) on the
whole eval set as one batch and on the first 8 samples one by one; prints the largest
absolute difference per output and exits 1 if one exceeds 1e-4 (float32 rounding of a
2-layer encoder with outputs of magnitude < 10: differences of order 1e-6 are expected).
"""
import sys

import numpy as np
import onnxruntime as ort


def main():
    model, ref = sys.argv[1], np.load(sys.argv[2])
    tokens = ref["tokens"]
    worst = 0.0
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        so.intra_op_num_threads = 1
        s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        logits, emb = s.run(["logits", "embedding"], {"tokens": tokens})
        one = [s.run(["logits", "embedding"], {"tokens": tokens[i:i + 1]}) for i in range(8)]
        for name, got, want in (("logits", logits, ref["logits"]), ("embedding", emb, ref["embedding"]),
                                ("logits, batch 1", np.concatenate([o[0] for o in one]), ref["logits"][:8]),
                                ("embedding, batch 1", np.concatenate([o[1] for o in one]), ref["embedding"][:8])):
            d = float(np.abs(got - want).max())
            worst = max(worst, d)
            print(f"{level.name}: {name}: {len(got)} samples, max |onnxruntime - torch| {d:.2e}")
    print("OK" if worst <= 1e-4 else "FAIL: onnxruntime differs from torch")
    return 0 if worst <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
