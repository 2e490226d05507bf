"""Where .ci/fetch-models.sh put onnxruntime-node: $ONNXQ_CACHE, else ~/.cache/onnxq;
and how to start node for it on the CPU that ONNXQ_ORT_CPU chooses (tests/ortnode.bash)."""
import os


def find_ort():
    """Path of the onnxruntime-node package, or None when it is not installed."""
    cache = os.environ.get("ONNXQ_CACHE") or os.path.expanduser("~/.cache/onnxq")
    p = os.path.join(cache, "node_modules", "onnxruntime-node")
    return p if os.path.isfile(os.path.join(p, "package.json")) else None


def node_cmd():
    """argv prefix that runs a node script with onnxruntime on the CPU of ONNXQ_ORT_CPU
    (native by default, or under qemu-x86_64 -cpu Haswell: see tests/ortnode.bash)."""
    return ["bash", os.path.join(os.path.dirname(os.path.abspath(__file__)), "ortnode.bash")]
