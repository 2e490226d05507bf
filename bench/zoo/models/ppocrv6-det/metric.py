"""PP-OCRv6 small text detector: the same probability map [1, 1, H, W] and the same metric
as paddleocr-det (its metric.py): boxes matched to float's at IoU >= 0.5 -> F1."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import zoolib  # noqa: E402

evaluate = zoolib.load_metric("paddleocr-det").evaluate
