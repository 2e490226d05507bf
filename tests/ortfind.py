"""Where .ci/fetch-models.sh put onnxruntime-node: $ONNXQ_CACHE, else ~/.cache/onnxq."""
import os


def find_ort():
    """Path of the onnxruntime-node package, or None when it is not installed."""
    cache = os.environ.get("ONNXQ_CACHE") or os.path.expanduser("~/.cache/onnxq")
    p = os.path.join(cache, "node_modules", "onnxruntime-node")
    return p if os.path.isfile(os.path.join(p, "package.json")) else None
