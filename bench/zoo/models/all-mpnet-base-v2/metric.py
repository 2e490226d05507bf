"""Same task metric as ../all-minilm-l6-v2/metric.py: pooled sentence-embedding cosine
(task: mean), nearest-neighbour retrieval agreement, worst sentence's SQNR."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "zoo_minilm_metric", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "all-minilm-l6-v2", "metric.py"))
_m = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_m)
evaluate = _m.evaluate
