"""The package as a user gets it (issue 23): `pip install .` in a fresh venv, then a
quantize through onnxruntime's CalibrationDataReader equal to the command's output; the
wheel (auditwheel-repaired, ONNXQ_WHEEL) in a fresh venv on a system whose libprotobuf-c,
libpng, libjpeg and libcjson are hidden: quantize and verify the bundled model."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, need


def venv(path):
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    return path / "bin" / "python"


def pip(py, *args):
    r = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


READER = textwrap.dedent("""
    import sys, numpy as np, onnxq
    from pathlib import Path
    from onnxruntime.quantization import CalibrationDataReader
    class Reader(CalibrationDataReader):
        def __init__(self, folder):
            self.enum_data = None
            self.data = [np.load(p / "image.npy") for p in sorted(Path(folder).iterdir())]
        def get_next(self):
            if self.enum_data is None:
                self.enum_data = iter([{"image": d} for d in self.data])
            return next(self.enum_data, None)
    reader = Reader("models/calib")
    onnxq.quantize('models/shapes_cnn.onnx', sys.argv[1], reader)
""")


@pytest.mark.slow
def test_pip_install_dot_in_fresh_venv(tmp_path):
    """pip install . (scikit-build-core builds the CMake project), then the acceptance
    line with an onnxruntime CalibrationDataReader; the output equals the command's up to
    the record of where the samples came from, and the wheel's onnxq is on PATH."""
    py = venv(tmp_path / "v")
    pip(py, str(ROOT))
    pip(py, "onnxruntime==1.30.0", "onnx==1.23.2")
    out = tmp_path / "q.onnx"
    r = subprocess.run([str(py), "-c", READER, str(out)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    exe = tmp_path / "v" / "bin" / "onnxq"
    r = subprocess.run([str(exe), "quantize", "models/shapes_cnn.onnx", "-o", str(tmp_path / "cli.onnx"), "--calib",
                        "models/calib", "--quiet"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    from test_api import same_but_data_source
    same_but_data_source(out, tmp_path / "cli.onnx")


SYSTEM_LIBS = ["libprotobuf-c.so.1", "libpng16.so.16", "libjpeg.so.62", "libcjson.so.1"]


@pytest.mark.slow
def test_wheel_without_dev_libs(tmp_path):
    wheel = os.environ.get("ONNXQ_WHEEL")
    need(wheel and Path(wheel).is_file(), "ONNXQ_WHEEL (the auditwheel-repaired wheel) not given")
    need(os.geteuid() == 0 and shutil.which("unshare"), "hiding the system libraries needs root and unshare")
    assert "manylinux" in Path(wheel).name
    py = venv(tmp_path / "v")
    pip(py, wheel)
    libdir = "/usr/lib/x86_64-linux-gnu"
    hide = "; ".join(f"mount --bind /dev/null {libdir}/{l}" for l in SYSTEM_LIBS if Path(libdir, l).exists())
    exe = tmp_path / "v" / "bin" / "onnxq"
    q = tmp_path / "q.onnx"
    script = (f"{hide}; {ROOT}/build/onnxq --help >/dev/null 2>&1 && echo 'system libraries still visible'; "
              f"{exe} quantize models/shapes_cnn.onnx -o {q} --calib models/calib --quiet && "
              f"{exe} verify models/shapes_cnn.onnx {q} --data models/eval --json - && "
              f"{py} -c 'import onnxq, sys; s = onnxq.quantize(\"models/shapes_cnn.onnx\", sys.argv[1], "
              f"\"models/calib\"); print(s[\"status\"])' {tmp_path / 'p.onnx'}")
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "system libraries still visible" not in r.stdout
    assert r.stdout.rstrip().endswith("ok")
    import json
    rep = json.loads(r.stdout[:r.stdout.rindex("}") + 1])
    assert rep["outputs"][0]["error"]["sqnr_db"] > 30 and rep["samples"] == 64, rep["outputs"][0]
    assert (tmp_path / "p.onnx").read_bytes() == q.read_bytes()
