"""Same task metric as ../silero-vad/metric.py (speech/non-speech agreement at 0.5,
probability SQNR)."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "zoo_silero_vad_metric", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "silero-vad", "metric.py"))
_m = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_m)
evaluate = _m.evaluate
