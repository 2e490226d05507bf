"""Document orientation classifier (4 classes: 0, 90, 180, 270 degrees): the top-1 metric of
paddleocr-cls (its metric.py): agreement with float, and each one's accuracy against the
turn applied (label)."""
import importlib.util
import os

_p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "paddleocr-cls", "metric.py")
_spec = importlib.util.spec_from_file_location("zoo_metric_paddleocr_cls_for_orientation", _p)
_m = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_m)
evaluate = _m.evaluate
