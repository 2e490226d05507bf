"""PP-OCRv6 small text detector: the same probability map [1, 1, H, W] and the same metric
as paddleocr-det (its metric.py): boxes matched to float's at IoU >= 0.5 -> F1."""
import importlib.util
import os

_p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "paddleocr-det", "metric.py")
_spec = importlib.util.spec_from_file_location("zoo_metric_paddleocr_det_for_v6", _p)
_m = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_m)
evaluate = _m.evaluate
