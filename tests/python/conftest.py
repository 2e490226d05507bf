"""Fixtures of the Python package's tests (tests/python/, run by .ci/test-all.sh with the
package installed in the venv of .ci/py-venv.sh)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("ONNXQ_CACHE", Path.home() / ".cache" / "onnxq"))
OCR = CACHE / "ocr" / "package" / "assets"
REQUIRE_ALL = os.environ.get("ONNXQ_REQUIRE_ALL") == "1"


def need(cond, why):
    """Skip when a prerequisite is missing; under ONNXQ_REQUIRE_ALL=1 (CI) fail instead."""
    if not cond:
        if REQUIRE_ALL:
            pytest.fail(f"missing prerequisite (ONNXQ_REQUIRE_ALL=1): {why}")
        pytest.skip(why)


@pytest.fixture(scope="session")
def cli():
    """The onnxq program installed with the package (the same build as the library)."""
    exe = Path(sys.prefix) / "bin" / "onnxq"
    if not exe.exists():
        exe = Path(shutil.which("onnxq") or "")
    assert exe.is_file(), "onnxq is not on PATH: is the package installed in this venv?"
    return str(exe)


def run_cli(cli, *args, cwd=None):
    return subprocess.run([cli, *map(str, args)], capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="session")
def shapes():
    return ROOT / "models" / "shapes_cnn.onnx"


def folder_samples(folder):
    """{input name: array} per sample subfolder (name order), as --calib reads them."""
    out = []
    for sub in sorted(p for p in Path(folder).iterdir() if p.is_dir()):
        out.append({f.stem: np.load(f) for f in sorted(sub.glob("*.npy"))})
    return out


@pytest.fixture(scope="session")
def text_images(tmp_path_factory):
    """PaddleOCR calibration samples rendered by models/make_text_images.py (system
    python3 with PIL, as the shell suites do): det at 96x96, cls 3x48x192."""
    py = "/usr/bin/python3"
    ok = subprocess.run([py, "-c", "import PIL"], capture_output=True).returncode == 0
    need(ok and (OCR / "ch_PP-OCRv4_det_infer.onnx").exists(),
         "PaddleOCR models (.ci/fetch-models.sh) or python3-pil missing")
    out = tmp_path_factory.mktemp("ocr")
    subprocess.run([py, str(ROOT / "models" / "make_text_images.py"), "--det", "3", "--cls", "8", "--rec", "1",
                    "--det-size", "96", "--seed", "11", str(out)], check=True, capture_output=True)
    return out
