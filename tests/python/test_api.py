"""The Python package over libonnxq (issue 23): quantize with onnxruntime's
CalibrationDataReader and plain iterables against the command on the same samples, the
options as keywords, errors as exceptions with the command's line, run/check/opt,
Ctrl-C, and memory with 1,000 samples."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import onnxq
from conftest import OCR, ROOT, folder_samples, need, run_cli

CALIB = ROOT / "models" / "calib"


def config_of(path):
    """The onnxq.quantize.config metadata entry of a model (onnx is in the test venv)."""
    import onnx
    m = onnx.load(str(path))
    return json.loads(next(p.value for p in m.metadata_props if p.key == "onnxq.quantize.config"))


def without_config(path):
    """The model's bytes as onnx writes them, without the onnxq.quantize.config entry."""
    import onnx
    m = onnx.load(str(path))
    keep = [p for p in m.metadata_props if p.key != "onnxq.quantize.config"]
    del m.metadata_props[:]
    m.metadata_props.extend(keep)
    return m.SerializeToString()


def same_but_data_source(fed, cli_out):
    """A model quantized from fed samples against the command's from the same samples in a
    folder: every byte the same except the record of where the samples came from (the
    metadata config's "calib" and its pipeline's data=/feed= option)."""
    assert without_config(fed) == without_config(cli_out)
    a, b = config_of(fed), config_of(cli_out)
    assert a["calib"] is None and b["calib"] is not None
    pa, pb = a["resolved"].pop("pipeline"), b["resolved"].pop("pipeline")
    assert "feed=" in pa and "data=" in pb
    a.pop("calib"), b.pop("calib")
    assert a == b


# ------------------------------------------------------------------ onnxruntime's reader

def ort_reader_class():
    """A CalibrationDataReader subclass as onnxruntime's own example writes it
    (onnxruntime-inference-examples quantization/image_classification/cpu/resnet50_data_reader.py:
    enum_data built on the first get_next, rewind), over a folder of .npy samples."""
    from onnxruntime.quantization import CalibrationDataReader

    class NpyDataReader(CalibrationDataReader):
        def __init__(self, calibration_folder: str, input_name: str):
            self.enum_data = None
            self.data_list = [s[input_name] for s in folder_samples(calibration_folder)]
            self.input_name = input_name
            self.datasize = len(self.data_list)

        def get_next(self):
            if self.enum_data is None:
                self.enum_data = iter([{self.input_name: d} for d in self.data_list])
            return next(self.enum_data, None)

        def rewind(self):
            self.enum_data = None

    return NpyDataReader


def test_reader_matches_cli(tmp_path, cli, shapes):
    r = run_cli(cli, "quantize", shapes, "-o", tmp_path / "cli.onnx", "--calib", CALIB, "--quiet")
    assert r.returncode == 0, r.stderr
    reader = ort_reader_class()(str(CALIB), "image")
    summary = onnxq.quantize(str(shapes), str(tmp_path / "py.onnx"), reader)
    assert summary["status"] == "ok" and summary["version"] == 1
    assert summary["calibration"]["samples"] == 32
    assert summary["config"]["resolved"]["target"] == "ort-x86"
    # the default method choice judged the candidates on 8 of the fed samples, as the
    # command did on the folder (same model below)
    assert summary["calibration_choice"]["held_out_samples"] == 8, summary["calibration_choice"]
    same_but_data_source(tmp_path / "py.onnx", tmp_path / "cli.onnx")
    # the samples as a folder path: byte for byte the command's output
    onnxq.quantize(shapes, tmp_path / "dir.onnx", CALIB)
    assert (tmp_path / "dir.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()


def test_inputs_iterable_bytes_modelproto(tmp_path, shapes):
    import onnx
    samples = folder_samples(CALIB)
    onnxq.quantize(shapes, tmp_path / "a.onnx", iter(samples))
    onnxq.quantize(shapes.read_bytes(), tmp_path / "b.onnx", samples)
    onnxq.quantize(onnx.load(str(shapes)), tmp_path / "c.onnx", (s for s in samples))
    a = (tmp_path / "a.onnx").read_bytes()
    assert (tmp_path / "b.onnx").read_bytes() == a and (tmp_path / "c.onnx").read_bytes() == a


def test_options_as_keywords(tmp_path, cli, shapes):
    args = ["--target", "generic", "--act-dtype", "int8", "--per-tensor", "--method", "minmax",
            "--no-bias-correction", "--exclude-nodes", "^conv1$"]
    r = run_cli(cli, "quantize", shapes, "-o", tmp_path / "cli.onnx", "--calib", CALIB, "--quiet", *args)
    assert r.returncode == 0, r.stderr
    s = onnxq.quantize(shapes, tmp_path / "py.onnx", CALIB, target="generic", act_dtype="int8", per_channel=False,
                       method="minmax", bias_correction=False, exclude_nodes="^conv1$")
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()
    res = s["config"]["resolved"]
    assert res["act_dtype"] == "int8" and res["sources"]["act_dtype"] == "option" and not res["bias_correction"]
    # dynamic mode needs no data; the summary lists its pass
    s = onnxq.quantize(ROOT / "models" / "text_transformer.onnx", tmp_path / "dyn.onnx", mode="dynamic")
    assert "quantize-dynamic" in [p["name"] for p in s["passes"]]
    assert "mode" in onnxq.quantize.__doc__ and "--target-sqnr" in onnxq.quantize.__doc__


def test_min_intensity_keyword(tmp_path, cli):
    """min_intensity: a 3-channel stem before a HardSwish (6912 multiply-adds per output pixel
    against 3 + 256 elements crossing to float) stays float at 64 and is quantized at 0; the
    summary counts it and says where the value came from."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper as h, numpy_helper as nh, TensorProto as TP
    r = np.random.default_rng(0)
    g = h.make_graph([h.make_node("Conv", ["x", "w1"], ["a"], name="stem", pads=[1, 1, 1, 1]),
                      h.make_node("HardSwish", ["a"], ["b"], name="hs"),
                      h.make_node("Conv", ["b", "w2"], ["y"], name="pw")], "mi",
                     [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [1, 256, 8, 8])],
                     [nh.from_array((0.1 * r.standard_normal((256, 3, 3, 3))).astype(np.float32), "w1"),
                      nh.from_array((0.05 * r.standard_normal((256, 256, 1, 1))).astype(np.float32), "w2")])
    model = tmp_path / "mi.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), model)
    samples = [{"x": r.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
    for t, floats in ((64, 1), (0, 0)):
        s = onnxq.quantize(model, tmp_path / f"py{t}.onnx", samples, min_intensity=t)
        stats = {k: v for p in s["passes"] if p["name"] == "insert-qdq" for k, v in p.get("stats", {}).items()}
        assert stats.get("convs_float_low_intensity", 0) == floats
        assert s["config"]["resolved"]["min_intensity"] == t and s["config"]["resolved"]["sources"]["min_intensity"] == "option"
        q = onnx.load(tmp_path / f"py{t}.onnx").graph
        stem_w = [n.input[1] for n in q.node if n.name == "stem"][0]
        assert (stem_w in {i.name for i in q.initializer}) == (floats == 1)  # float: the weight itself


def test_weight_rounding_from_a_reader(tmp_path, cli, shapes):
    # GPTQ weight rounding reads the fed samples again (its fit and held-out samples by
    # index): the same model as the command's from the folder
    r = run_cli(cli, "quantize", shapes, "-o", tmp_path / "cli.onnx", "--calib", CALIB, "--quiet",
                "--weight-rounding", "gptq")
    assert r.returncode == 0, r.stderr
    reader = ort_reader_class()(str(CALIB), "image")
    s = onnxq.quantize(str(shapes), str(tmp_path / "py.onnx"), reader, weight_rounding="gptq")
    wr = s["weight_rounding"]
    assert wr["layers"] == 3 and wr["samples"] == 16 and wr["held_out_samples"] == 8, wr
    assert s["config"]["resolved"]["sources"]["weight_rounding"] == "option"
    same_but_data_source(tmp_path / "py.onnx", tmp_path / "cli.onnx")


def test_text_transformer_reader(tmp_path, cli):
    """The bundled encoder (int64 token ids): a reader over models/text_calib."""
    model, calib = ROOT / "models" / "text_transformer.onnx", ROOT / "models" / "text_calib"
    r = run_cli(cli, "quantize", model, "-o", tmp_path / "cli.onnx", "--calib", calib, "--quiet")
    assert r.returncode == 0, r.stderr
    onnxq.quantize(model, tmp_path / "py.onnx", folder_samples(calib))
    same_but_data_source(tmp_path / "py.onnx", tmp_path / "cli.onnx")


@pytest.mark.parametrize("which", ["cls", "det"])
def test_paddleocr_reader(tmp_path, cli, text_images, which):
    model = OCR / ("ch_ppocr_mobile_v2.0_cls_infer.onnx" if which == "cls" else "ch_PP-OCRv4_det_infer.onnx")
    data = text_images / which / "tensors"
    r = run_cli(cli, "quantize", model, "-o", tmp_path / "cli.onnx", "--calib", data, "--quiet")
    assert r.returncode == 0, r.stderr
    reader = ort_reader_class()(str(data), "x")
    s = onnxq.quantize(str(model), str(tmp_path / "py.onnx"), reader)
    assert s["bias_correction"]["layers"] > 0
    same_but_data_source(tmp_path / "py.onnx", tmp_path / "cli.onnx")
    onnxq.check(tmp_path / "py.onnx")  # the checker accepts it (raises otherwise)


# ------------------------------------------------------------------ errors

def test_errors_carry_the_command_line(tmp_path, cli, shapes):
    r = run_cli(cli, "quantize", shapes, "-o", tmp_path / "x.onnx", "--calib", CALIB, "--target", "bogus")
    with pytest.raises(onnxq.UsageError) as e:
        onnxq.quantize(shapes, tmp_path / "x.onnx", CALIB, target="bogus")
    assert str(e.value) == r.stderr.strip() and e.value.exit_code == r.returncode == 2
    assert isinstance(e.value, ValueError)
    # a hostile model file: BadInputError with the command's line
    bad = sorted((ROOT / "tests" / "bad").glob("*.onnx"))[0]
    r = run_cli(cli, "check", bad)
    with pytest.raises(onnxq.BadInputError) as e:
        onnxq.check(bad)
    assert r.returncode == 2 and str(e.value) == r.stderr.strip().splitlines()[0]
    with pytest.raises(onnxq.BadInputError):
        onnxq.quantize(b"not a model", tmp_path / "x.onnx", CALIB)
    # a missing model file: bad input, as the command (exit 2), same line
    r = run_cli(cli, "quantize", tmp_path / "none.onnx", "-o", tmp_path / "x.onnx", "--calib", CALIB)
    with pytest.raises(onnxq.BadInputError) as e:
        onnxq.quantize(tmp_path / "none.onnx", tmp_path / "x.onnx", CALIB)
    assert r.returncode == e.value.exit_code == 2 and str(e.value) == r.stderr.strip(), (r.stderr, str(e.value))
    # a sample without the model's input: named, with the sample's number
    with pytest.raises(onnxq.UsageError, match=r'fed sample 1: no array for input "image" \(the sample has "img"\)'):
        onnxq.quantize(shapes, tmp_path / "x.onnx", [{"img": np.zeros((1, 3, 24, 24), np.float32)}])
    with pytest.raises(onnxq.UsageError, match=r"sample #1: input \"image\": got float64"):  # the wrong dtype
        onnxq.quantize(shapes, tmp_path / "x.onnx", [{"image": np.zeros((1, 3, 24, 24), np.float64)}])
    with pytest.raises(onnxq.UsageError, match='unknown key "no_such_option"'):
        onnxq.quantize(shapes, tmp_path / "x.onnx", CALIB, no_such_option=1)
    # nothing quantized: a failed job (the command exits 1)
    r = run_cli(cli, "quantize", shapes, "-o", tmp_path / "x.onnx", "--calib", CALIB, "--op-types", "Foo")
    with pytest.raises(onnxq.JobError) as e:
        onnxq.quantize(shapes, tmp_path / "x.onnx", CALIB, op_types="Foo")
    assert e.value.exit_code == r.returncode == 1 and str(e.value) == r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x.onnx").exists()


# ------------------------------------------------------------------ run, check, opt

def test_run_check_opt(tmp_path, shapes):
    x = np.load(CALIB / "sample_000" / "image.npy")
    out = onnxq.run(shapes, {"image": x})
    assert list(out) == ["logits", "probs"] and out["probs"].shape == (1, 4)
    assert abs(float(out["probs"].sum()) - 1) < 1e-5
    import onnxruntime as ort
    ref = ort.InferenceSession(str(shapes)).run(None, {"image": x})
    assert np.allclose(out["logits"], ref[0], atol=1e-4)
    q = tmp_path / "q.onnx"
    onnxq.quantize(shapes, q, CALIB)
    a = onnxq.run(q, {"image": x}, target="ort-x86")["probs"]
    assert a.argmax() == out["probs"].argmax()
    assert onnxq.check(q) == []
    data = onnxq.opt(shapes, "fold-constants,eliminate-dead")
    assert isinstance(data, bytes) and onnxq.check(data) == []
    with pytest.raises(onnxq.UsageError, match='has no option "methd"'):
        onnxq.opt(shapes, "calibrate{methd=minmax}")
    with pytest.raises(onnxq.UsageError, match='no array for input "image"'):
        onnxq.run(shapes, {})


# ------------------------------------------------------------------ Ctrl-C, memory

def test_ctrl_c_stops_the_job(tmp_path, shapes):
    """SIGINT while the library calibrates (200,000 generated samples: minutes): the job
    stops at the next sample, KeyboardInterrupt is raised, nothing is written."""
    # Python's own SIGINT handler, also when this runs in a background job (nohup, &), where
    # the child inherits an ignored SIGINT and would never see the signal
    code = textwrap.dedent(f"""
        import signal, sys, time, onnxq
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("start", flush=True)
        try:
            onnxq.quantize({str(shapes)!r}, {str(tmp_path / "x.onnx")!r}, calib_random=200000)
        except KeyboardInterrupt as e:
            print("interrupted", e, flush=True)
            sys.exit(3)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "start"
    time.sleep(2.0)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 3 and out.startswith("interrupted"), out
    assert time.monotonic() - t0 < 10
    assert not (tmp_path / "x.onnx").exists()


def peak_rss_mb(n, tmp_path, shapes):
    code = textwrap.dedent(f"""
        import resource, numpy as np, onnxq
        class Reader:  # onnxruntime's interface: get_next until None
            def __init__(self, n): self.k, self.n = 0, n
            def get_next(self):
                if self.k == self.n: return None
                self.k += 1
                return {{"image": np.random.default_rng(self.k).random((16, 3, 24, 24), np.float32)}}
        onnxq.quantize({str(shapes)!r}, {str(tmp_path / f"m{n}.onnx")!r}, Reader({n}), threads=2)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(r.stdout.strip())


def test_memory_flat_over_1000_samples(tmp_path, shapes):
    """1,000 samples of 16 images (110 KB each, 110 MB in all) through a reader: the peak
    RSS is within 20 MB of 100 samples' (the arrays go to the temporary sample file)."""
    small, big = peak_rss_mb(100, tmp_path, shapes), peak_rss_mb(1000, tmp_path, shapes)
    print(f"peak RSS: 100 samples {small:.1f} MB, 1000 samples {big:.1f} MB")
    assert big - small < 20, (small, big)


# ------------------------------------------------------------------ the onnxruntime example

def test_ort_example_changes_two_lines(tmp_path, text_images):
    """python/examples/onnxq_static.py is onnxruntime's quantize_static example script with
    its import line and its call line changed; both run on PaddleOCR cls."""
    ex = ROOT / "python" / "examples"
    a = (ex / "ort_static.py").read_text().splitlines()
    b = (ex / "onnxq_static.py").read_text().splitlines()
    assert len(a) == len(b)
    diff = [(x, y) for x, y in zip(a, b) if x != y]
    assert [d[1].strip() for d in diff] == ["import onnxq", "onnxq.quantize(input_model_path, output_model_path, dr)"]
    assert diff[0][0] == "from onnxruntime.quantization import quantize_static"
    model = OCR / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    r = subprocess.run([sys.executable, str(ex / "onnxq_static.py"), "--input_model", str(model), "--output_model",
                        str(tmp_path / "q.onnx"), "--calibrate_dataset", str(text_images / "cls" / "tensors")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Calibrated and quantized model saved." in r.stdout and r.stdout.count("Avg:") == 2


# ------------------------------------------------------------------ verify

def test_verify_equals_the_command_report(tmp_path, cli, shapes):
    q = tmp_path / "q.onnx"
    onnxq.quantize(shapes, q, CALIB)
    eval_dir = ROOT / "models" / "eval"
    for target in ("reference", "ort-x86"):
        r = run_cli(cli, "verify", shapes, q, "--data", eval_dir, "--json", tmp_path / "v.json", "--min-sqnr", "30",
                    "--target", target, "--quiet")
        assert r.returncode == 0, r.stderr
        want = json.loads((tmp_path / "v.json").read_text())
        want["memory"].pop("peak_rss_bytes")
        got = onnxq.verify(str(shapes), str(q), str(eval_dir), target=target, min_sqnr=30)
        assert got == want
    # the same samples from a reader: the same errors
    got2 = onnxq.verify(shapes, q, folder_samples(eval_dir))
    ref = onnxq.verify(shapes, q, eval_dir)
    assert got2["outputs"][0]["error"] == ref["outputs"][0]["error"]
    assert got2["samples"] == 64 and got2["layers"] == ref["layers"]
    with pytest.raises(onnxq.UsageError, match='sample 1: no array for input "image"'):
        onnxq.verify(shapes, q, [{"x": np.zeros(1, np.float32)}])


def test_dump_equals_the_command(cli, shapes, tmp_path):
    for args, kw in (([], {}), (["--stats"], {"stats": True})):
        r = run_cli(cli, "dump", "--json", *args, shapes)
        assert r.returncode == 0, r.stderr
        assert onnxq.dump(str(shapes), **kw) == json.loads(r.stdout)
    d = onnxq.dump(shapes.read_bytes())
    assert d["file"] == "<model bytes>" and d["node_count"] == 9
    assert {o["op"]: o["count"] for o in d["op_histogram"]}["Conv"] == 2


def test_progress_log_and_config(tmp_path, cli, shapes):
    events, lines = [], []
    onnxq.quantize(shapes, tmp_path / "a.onnx", CALIB, progress=lambda w, d, t: events.append((w, d, t)),
                   log=lines.append)
    assert events[0][1:] == (0, 32) and ("calibrating", 32, 32) in events  # one calibration loop (SmoothQuant observes it too)
    assert any(line.startswith("onnxq quantize: bias correction:") for line in lines)
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"target": "generic", "act_dtype": "int8"}))
    r = run_cli(cli, "quantize", shapes, "-o", tmp_path / "cli.onnx", "--calib", CALIB, "--config", cfg, "--quiet")
    assert r.returncode == 0, r.stderr
    s = onnxq.quantize(shapes, tmp_path / "py.onnx", CALIB, config=cfg)
    assert s["config"]["resolved"]["sources"]["act_dtype"] == "config"
    assert (tmp_path / "py.onnx").read_bytes() == (tmp_path / "cli.onnx").read_bytes()


def float16_copy(model, path):
    """The model with every float tensor in float16, as a GPU export writes it."""
    import onnx
    from onnx import TensorProto, numpy_helper
    m = onnx.load(str(model))
    for i in m.graph.initializer:
        if i.data_type == TensorProto.FLOAT:
            i.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(i).astype(np.float16), i.name))
    for v in list(m.graph.input) + list(m.graph.output):
        v.type.tensor_type.elem_type = TensorProto.FLOAT16
    del m.graph.value_info[:]
    onnx.save(m, str(path))
    return path


def test_float16_model_quantize_and_verify(tmp_path, shapes):
    """A float16 export of the bundled model: quantized from numpy float16 samples with its
    float16 interface kept (widen-float16), and verified against the float16 model."""
    import onnx
    from onnx import TensorProto
    f16, q16 = float16_copy(shapes, tmp_path / "f16.onnx"), tmp_path / "q16.onnx"
    samples = [{k: v.astype(np.float16) for k, v in s.items()} for s in folder_samples(CALIB)]
    onnxq.quantize(f16, q16, samples)
    q = onnx.load(str(q16))
    assert [v.type.tensor_type.elem_type for v in list(q.graph.input) + list(q.graph.output)] == \
        [TensorProto.FLOAT16] * (len(q.graph.input) + len(q.graph.output))
    rep = onnxq.verify(f16, q16, samples[:8])
    assert rep["worst"]["sqnr_db"] > 30, rep["worst"]


def test_float16_model_runs(tmp_path, shapes):
    """onnxq.run on a float16 model: no float16 Conv kernel, so it computes in float32
    inside and returns float16 outputs (as `onnxq run`)."""
    f16 = float16_copy(shapes, tmp_path / "f16.onnx")
    x = folder_samples(CALIB)[0]
    out16 = onnxq.run(f16, {k: v.astype(np.float16) for k, v in x.items()})
    out32 = onnxq.run(shapes, x)
    for k in out32:
        assert out16[k].dtype == np.float16
        assert np.abs(out16[k].astype(np.float32) - out32[k]).max() <= 0.05 * (1 + np.abs(out32[k]).max())
