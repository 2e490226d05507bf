"""Document orientation classifier (4 classes: 0, 90, 180, 270 degrees): the top-1 metric of
paddleocr-cls (its metric.py): agreement with float, and each one's accuracy against the
turn applied (label)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import zoolib  # noqa: E402

evaluate = zoolib.load_metric("paddleocr-cls").evaluate
