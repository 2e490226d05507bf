"""onnxq: post-training quantization of ONNX models for the runtime they will run on.

A thin layer over libonnxq (the C library the ``onnxq`` command is built on): every job
is a library call, the GIL is released while it runs, and errors are the command's
one-line messages raised as exceptions.

    import onnxq
    summary = onnxq.quantize("model.onnx", "model_int8.onnx", reader)   # a CalibrationDataReader
    onnxq.check("model_int8.onnx")
    outputs = onnxq.run("model_int8.onnx", {"input": x}, target="ort-x86")

docs/python.md has the whole API and a line-for-line onnxruntime ``quantize_static`` port.
"""
import ctypes
import json
import os
import sys
import threading
from ctypes import byref, c_char_p, c_size_t, c_void_p

import numpy as np

from . import _lib
from ._lib import lib

__all__ = ["quantize", "verify", "run", "check", "opt", "dump", "Error", "BadInputError", "UsageError", "JobError",
           "QUANTIZE_OPTIONS", "__version__"]
__version__ = "0.1.0"

# ------------------------------------------------------------------ errors

OQ_OK, OQ_ERR_IO, OQ_ERR_PARSE, OQ_ERR_INVALID, OQ_ERR_UNSUPPORTED, OQ_ERR_NOMEM, OQ_ERR_USAGE, \
    OQ_ERR_NUMERIC, OQ_ERR_INTERNAL, OQ_ERR_STOPPED = range(10)


class Error(Exception):
    """An onnxq error. ``str(e)`` is the line the ``onnxq`` command prints for it;
    ``e.status`` the library's status name ("usage error", "parse error", ...),
    ``e.exit_code`` the command's exit code (2: bad input or usage, 1: a failed job),
    ``e.lines`` every error line (the first is the message)."""

    def __init__(self, message, status="", exit_code=1, lines=()):
        super().__init__(message)
        self.status = status
        self.exit_code = exit_code
        self.lines = list(lines) or [message]


class BadInputError(Error):
    """The model or the data is bad (the command exits 2): a file that does not parse, an
    invalid or unsupported model, NaN in the data."""


class UsageError(Error, ValueError):
    """An option or argument is wrong (the command exits 2)."""


class JobError(Error):
    """The job failed (the command exits 1): I/O, out of memory, nothing quantized."""


class _Diag:
    """An oq_diag the library fills; raises the first error as the command prints it."""

    def __init__(self):
        self.d = _lib.Diag()
        _lib.oq_diag_init(byref(self.d))

    def __enter__(self):
        return self

    def __exit__(self, *a):
        _lib.oq_diag_free(byref(self.d))

    def entries(self):
        buf = ctypes.create_string_buffer(4096)
        out = []
        for i in range(self.d.count):
            e = self.d.entries[i]
            _lib.oq_diag_format(ctypes.pointer(e), buf, len(buf))
            line = buf.value.decode("utf-8", "replace")
            if not e.file:  # the command's prefix for a line without a file
                line = "onnxq: " + line
            out.append((e.severity, e.code, line))
        return out

    def lines(self, severity=None):
        return [line for sev, _, line in self.entries() if severity is None or sev == severity]

    def fail(self, st, exit_code=None):
        errs = [(c, line) for sev, c, line in self.entries() if sev == 2]
        # a line restating the category of an earlier error ("pass ... failed: usage error")
        # is left out, as the command does
        lines = [line for i, (c, line) in enumerate(errs)
                 if not (i and line.endswith("failed: " + _lib.oq_status_name(c).decode()))]
        msg = lines[0] if lines else "onnxq: " + _lib.oq_status_name(st).decode()
        if st == OQ_ERR_STOPPED:
            raise KeyboardInterrupt(msg)
        if exit_code is None:
            exit_code = _lib.oq_quantize_exit_code(st)
        status = _lib.oq_status_name(st).decode()
        cls = JobError if exit_code != 2 else UsageError if st == OQ_ERR_USAGE else BadInputError
        raise cls(msg, status, exit_code, lines)


def _b(s):
    return os.fsencode(s) if s is not None else None


# ------------------------------------------------------------------ models

def _model_bytes(model):
    """(path, None) for a path, (None, bytes) for bytes or an onnx.ModelProto."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model), None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return None, bytes(model)
    if hasattr(model, "SerializeToString"):  # onnx.ModelProto (onnx is optional)
        return None, model.SerializeToString()
    raise TypeError(f"model: a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


class _Model:
    """A model read into the library (freed on exit)."""

    def __init__(self, model, d):
        path, data = _model_bytes(model)
        self.name = path if path is not None else "<model bytes>"
        self.m = c_void_p()
        if path is not None:
            st = _lib.oq_model_read(_b(path), None, byref(self.m), byref(d.d))
        else:
            st = _lib.oq_model_read_buffer(data, len(data), b"<model bytes>", None, byref(self.m), byref(d.d))
        if st != OQ_OK:
            d.fail(st)

    def close(self):
        if self.m:
            _lib.oq_model_free(self.m)
            self.m = c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()


# ------------------------------------------------------------------ tensors

_NP_TO_ONNX = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3, np.dtype(np.uint16): 4,
               np.dtype(np.int16): 5, np.dtype(np.int32): 6, np.dtype(np.int64): 7, np.dtype(np.bool_): 9,
               np.dtype(np.float16): 10, np.dtype(np.float64): 11, np.dtype(np.uint32): 12,
               np.dtype(np.uint64): 13}
_ONNX_TO_NP = {v: k for k, v in _NP_TO_ONNX.items()}


def _borrow(name, a, t):
    """Fill the oq_rt_tensor t with a view of array a (no copy when a is C-contiguous);
    returns the array that must stay alive while t is used."""
    a = np.asarray(a)
    if a.dtype not in _NP_TO_ONNX:
        raise TypeError(f"input \"{name}\": numpy dtype {a.dtype} is not an ONNX tensor type onnxq runs")
    if a.ndim > _lib.OQ_RT_MAX_RANK:
        raise ValueError(f"input \"{name}\": rank {a.ndim} > {_lib.OQ_RT_MAX_RANK}")
    a = np.ascontiguousarray(a)
    t.dtype = _NP_TO_ONNX[a.dtype]
    t.rank = a.ndim
    for i, n in enumerate(a.shape):
        t.dims[i] = n
    t.data = a.ctypes.data if a.size else None
    t.nbytes = a.nbytes
    t.owned = False
    return a


class _Owned:
    """Keeps an owned oq_rt_tensor alive for the numpy array that views its data."""

    def __init__(self, t):
        self.t = t

    def __del__(self):
        _lib.oq_rt_tensor_release(byref(self.t))


def _to_numpy(t):
    """An output tensor as a numpy array over the library's buffer (zero-copy; the buffer
    is released with the array)."""
    dt = _ONNX_TO_NP.get(t.dtype)
    shape = tuple(t.dims[i] for i in range(t.rank))
    if dt is None:
        _lib.oq_rt_tensor_release(byref(t))
        raise JobError(f"onnxq: an output of ONNX dtype {t.dtype} has no numpy type", "unsupported", 1)
    if t.nbytes == 0 or not t.data:
        _lib.oq_rt_tensor_release(byref(t))
        return np.zeros(shape, dt)
    if not t.owned:  # not expected from oq_plan_run: copy
        return np.frombuffer(ctypes.string_at(t.data, t.nbytes), dt).reshape(shape).copy()
    buf = (ctypes.c_char * t.nbytes).from_address(t.data)
    buf._onnxq_owner = _Owned(t)  # released with the last array over buf
    return np.frombuffer(buf, dt).reshape(shape)


# ------------------------------------------------------------------ background calls

def _call(fn, *args):
    """Run the library call fn(*args) in a thread (ctypes releases the GIL) so that Ctrl-C
    reaches Python: it asks the library to stop (oq_stop_request) and waits for it."""
    box = {}

    def work():
        try:
            box["st"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["exc"] = e

    _lib.oq_stop_clear()
    th = threading.Thread(target=work, name="onnxq", daemon=True)
    th.start()
    try:
        while th.is_alive():
            th.join(0.1)
    except KeyboardInterrupt:
        _lib.oq_stop_request()
        th.join()
        _lib.oq_stop_clear()
        raise
    if "exc" in box:
        raise box["exc"]
    return box["st"]


# ------------------------------------------------------------------ quantize

QUANTIZE_OPTIONS = {
    # name: (command-line option, what)
    "mode": ("--mode", "static (default) | dynamic | weight-only"),
    "target": ("--target", "ort-x86 (default) | ort-x86-vnni | generic | host"),
    "calib": ("--calib", "folder of samples (instead of calibration_data_reader)"),
    "calib_images": ("--calib-images", "folder of PNG/JPEG images"),
    "calib_random": ("--calib-random", "N random samples (smoke tests)"),
    "seed": ("--seed", "seed for calib_random (default 1)"),
    "max_samples": ("--max-samples", "use at most N samples"),
    "size": ("--size", "images: HxW"), "mean": ("--mean", "images: a,b,c"), "std": ("--std", "images: a,b,c"),
    "bgr": ("--bgr", "images: B,G,R order"), "grey": ("--grey", "images: one channel"),
    "layout": ("--layout", "images: nchw | nhwc"), "scale": ("--scale", "images: pixels divided by this"),
    "dims": ("--dim", "\"NAME=N,...\" symbolic dimension sizes (generated data)"),
    "input_values": ("--input-value", "\"NAME=V,...\" inputs filled with V"),
    "method": ("--method", "select (default: chosen on held-out samples) | auto | minmax | percentile | entropy | mse"),
    "percentile": ("--percentile", "percentile P for every tensor, no choice (default 99.99; 99.999 for 16-bit activations)"),
    "averaging": ("--averaging", "minmax moving-average constant in (0, 1]"),
    "nan_policy": ("--nan-policy", "quantized (default) | error | ignore"),
    "act_dtype": ("--act-dtype", "uint8 | int8 | uint16 | int16 (default: the target's)"),
    "act_symmetric": ("--act-symmetric", "symmetric activations"),
    "weight_dtype": ("--weight-dtype", "int8 | uint8 | int16 | uint16 | int4 | uint4 (default: the target's)"),
    "weight_symmetric": ("--weight-asymmetric", "False: asymmetric weights (default: the target's)"),
    "per_channel": ("--per-tensor", "False: one weight scale per tensor (default True)"),
    "weight_block_size": ("--weight-block-size", "blocked weights along the reduction axis"),
    "reduce_range": ("--reduce-range", "7-bit weights"),
    "op_types": ("--op-types", "\"A,B,...\" op types to quantize (default: the target's)"),
    "depthwise": ("--depthwise", "int8 | float (default: the target's)"),
    "min_intensity": ("--min-intensity", "a Conv with fewer multiply-adds per float-boundary element stays float (default: the target's)"),
    "weight_rounding": ("--weight-rounding", "nearest | gptq (default: the target's)"),
    "embedding_dtype": ("--embedding-dtype", "int8 (default) | float"),
    "include_nodes": ("--include-nodes", "only nodes whose name matches (regex)"),
    "exclude_nodes": ("--exclude-nodes", "skip nodes whose name matches (regex)"),
    "overrides": ("--overrides", "JSON file {tensor: {scale, zero_point, dtype, min, max}}"),
    "threads": ("--threads", "executor threads (default: all CPUs)"),
    "prepare": ("--prepare/--no-prepare", "graph preparation (default: the target's)"),
    "bias_correction": ("--bias-correction/--no-bias-correction", "default: the target's"),
    "smooth_quant": ("--smooth-quant", "\"auto\" (default in static mode: alpha per input) | None (off) | alpha in [0, 1]"),
    "format": ("--format", "weight-only: qdq (default) | matmulnbits"),
    "algo": ("--algo", "weight-only: rtn (default) | gptq | awq"),
    "weight_scale_dtype": ("--weight-scale-dtype", "weight-only qdq: float32 | float16"),
    "accuracy_level": ("--accuracy-level", "matmulnbits accuracy_level 0..4"),
    "gptq_damp": ("--gptq-damp", "GPTQ dampening (default 0.01)"),
    "gptq_act_order": ("--gptq-act-order", "GPTQ: features by decreasing input energy"),
    "target_sqnr": ("--target-sqnr", "dB: return the worst layers to float until the output SQNR reaches it"),
    "max_fallback": ("--max-fallback", "at most N layers in float (default 10)"),
    "eval": ("--eval", "samples folder the fallback measures on"),
    "fallback_search": ("--fallback-search", "greedy (default) | bisect"),
    "config": ("--config", "a configuration file (JSON as --print-config prints); keywords win"),
}


def _samples(reader):
    """The samples of a CalibrationDataReader (get_next() until None) or an iterable of
    dicts of arrays, one at a time."""
    if hasattr(reader, "get_next"):
        while True:
            s = reader.get_next()
            if s is None:
                return
            yield s
    else:
        yield from reader


def _feed(reader, d):
    """A fed sample source with the reader's samples (each copied into the library's
    temporary sample file, then dropped here)."""
    src = c_void_p()
    st = _lib.oq_calib_source_feed(byref(src), byref(d.d))
    if st != OQ_OK:
        d.fail(st)
    try:
        for k, sample in enumerate(_samples(reader), 1):
            if not isinstance(sample, dict):
                raise UsageError(f"onnxq quantize: calibration sample {k}: a dict of input name -> array, not "
                                 f"{type(sample).__name__}", "usage error", 2)
            n = len(sample)
            names = (c_char_p * max(n, 1))()
            ts = (_lib.RtTensor * max(n, 1))()
            keep = []
            for i, (name, a) in enumerate(sample.items()):
                names[i] = str(name).encode()
                keep.append(_borrow(name, a, ts[i]))
            st = _lib.oq_calib_source_feed_add(src, names, ts, n, byref(d.d))
            del keep, sample
            if st != OQ_OK:
                d.fail(st)
    except BaseException:
        _lib.oq_calib_source_free(src)
        raise
    return src


class _Progress:
    """Progress of calibration and the other sample loops: a callback(what, done, total),
    else a tqdm bar when tqdm is installed and progress=True."""

    def __init__(self, progress):
        self.cb = progress if callable(progress) else None
        self.bar = None
        self.what = None
        if progress is True and self.cb is None:
            try:
                import tqdm  # noqa: F401
                self.tqdm = tqdm.tqdm
            except ImportError:
                self.tqdm = None
        else:
            self.tqdm = None
        self.active = self.cb is not None or self.tqdm is not None
        self.c_hook = _lib.PROGRESS_FN(self._hook)

    def _hook(self, what, done, total, user):
        what = what.decode(errors="replace")
        if self.cb:
            self.cb(what, int(done), int(total))
            return
        if done == 0 or self.bar is None or what != self.what:
            if self.bar is not None:
                self.bar.close()
            self.bar = self.tqdm(total=int(total), desc=what, leave=False)
            self.what = what
        self.bar.n = int(done)
        self.bar.refresh()

    def close(self):
        if self.bar is not None:
            self.bar.close()


def quantize(model_input, model_output, calibration_data_reader=None, *, target="ort-x86", mode="static",
             progress=None, log=None, **options):
    """Quantize an ONNX model; returns the summary ``onnxq quantize --json`` writes, as a dict.

    model_input: a path, bytes, or an ``onnx.ModelProto``. model_output: the path to write.
    calibration_data_reader: an object with ``get_next()`` returning a dict of numpy arrays
    (input name -> array) and None at the end — onnxruntime's ``CalibrationDataReader`` as
    it is — or any iterable of such dicts, or a path to a folder of samples (``--calib``).
    Each sample is copied into a temporary file the library reads back (the reader's arrays
    are not kept: memory stays flat), and every step that needs samples reads them there.

    Every option of ``onnxq quantize`` is a keyword, by the name of its ``--config`` key
    (``onnxq.QUANTIZE_OPTIONS`` maps each to its command-line option):

    {options}

    progress: a callable(what, done, total), or True for a tqdm bar (when tqdm is installed).
    log: a callable(line) for the lines the command prints while working (notes, the bias
    correction and saturation check summaries); default: none.

    Raises UsageError (a bad option), BadInputError (a bad model or data), JobError (the job
    failed), each with the command's one-line message; KeyboardInterrupt after Ctrl-C (the
    library stops at the next sample or pass). With ``target_sqnr`` not reached, the model
    is written and ``summary["fallback"]["target_met"]`` is False (the command exits 1).
    """
    if "config" in options:
        config_file = options.pop("config")
    else:
        config_file = None
    path, data = _model_bytes(model_input)
    # with a configuration file, its target and mode stand unless given here
    doc = {} if config_file is not None else {"target": target, "mode": mode}
    if config_file is not None:
        if target != "ort-x86":
            doc["target"] = target
        if mode != "static":
            doc["mode"] = mode
    for k, v in options.items():
        if k in ("size",) and isinstance(v, (tuple, list)):
            v = f"{v[0]}x{v[1]}"
        elif k in ("mean", "std", "op_types") and isinstance(v, (tuple, list)):
            v = ",".join(str(x) for x in v)
        elif k in ("dims", "input_values") and isinstance(v, dict):
            v = ",".join(f"{a}={b}" for a, b in v.items())
        elif isinstance(v, os.PathLike):
            v = os.fspath(v)
        doc[k] = v
    if isinstance(calibration_data_reader, (str, os.PathLike)):
        doc["calib"] = os.fspath(calibration_data_reader)
        calibration_data_reader = None
    text = json.dumps(doc).encode()
    opts = _lib.oq_quantize_options_new()
    if not opts:
        raise MemoryError("onnxq: out of memory")
    src = c_void_p()
    prog = _Progress(progress)
    lines = []

    def on_line(line, user):
        s = line.decode("utf-8", "replace")
        if log:
            log(s)
        lines.append(s)

    c_log = _lib.LOG_FN(on_line)
    res = _lib.QuantizeResult()
    try:
        with _Diag() as d:
            if config_file is not None:
                st = _lib.oq_quantize_options_load_file(opts, _b(config_file), True, byref(d.d))
                if st != OQ_OK:
                    d.fail(st)
            st = _lib.oq_quantize_options_load(opts, text, len(text), b"options", False, byref(d.d))
            if st != OQ_OK:
                d.fail(st)
            if calibration_data_reader is not None:
                src = _feed(calibration_data_reader, d)
                _lib.oq_quantize_options_set_source(opts, src)
            _lib.oq_quantize_options_set_log(opts, c_log, None, prog.active)
            if prog.active:
                _lib.oq_calib_progress_set_hook(prog.c_hook, None)
            try:
                if path is not None:
                    st = _call(_lib.oq_quantize, _b(path), _b(model_output), opts, byref(res), byref(d.d))
                else:
                    st = _call(_lib.oq_quantize_buffer, data, len(data), b"<model bytes>", _b(model_output), opts,
                               byref(res), byref(d.d))
            finally:
                if prog.active:
                    _lib.oq_calib_progress_set_hook(None, None)
                prog.close()
            if st != OQ_OK:
                d.fail(st, res.exit_code or None)
            summary = json.loads(ctypes.string_at(res.summary).decode()) if res.summary else {}
            return summary
    finally:
        _lib.oq_quantize_result_free(byref(res))
        if src:
            _lib.oq_calib_source_free(src)
        _lib.oq_quantize_options_delete(opts)


quantize.__doc__ = quantize.__doc__.replace(
    "{options}", "\n    ".join(f"{k:<20} {o:<22} {w}" for k, (o, w) in QUANTIZE_OPTIONS.items()))


# ------------------------------------------------------------------ verify

def verify(float_model, quant_model, data, *, target="reference", isolation=True, min_sqnr=None, top=10,
           threads=0):
    """Compare a quantized model with its float model on the same samples (``onnxq verify``,
    docs/verify.md); returns the report ``onnxq verify --json`` writes, as a dict: per output
    "error" (sqnr_db, cosine, max_abs_err, ...), top-1/top-k agreement for class scores,
    "slices" (the parts of a Concat output) and the "worst" part; per layer the quantizer's
    range, the float range, the accumulated and isolated errors; "worst_layers"; "weights".

    data: a folder of samples (as ``--data``), or a CalibrationDataReader / iterable of dicts
    of arrays. target: the quantized model's arithmetic (reference, ort-x86, ...).
    min_sqnr: also report "pass" (every output's worst part at least this many dB).
    """
    tg = None
    if target not in (None, "reference"):
        tg = _lib.oq_target_find(_b(target))
        if not tg:
            raise UsageError(f"onnxq verify: --target \"{target}\": unknown target (one of: "
                             f"{_lib.oq_target_names().decode()})", "usage error", 2)
    with _Diag() as d, _Model(float_model, d) as fm, _Model(quant_model, d) as qm:
        for m in (fm, qm):  # float16 models: computed in float32 inside (as `onnxq verify`)
            st = _lib.oq_model_widen_float16(m.m, None, byref(d.d))
            if st != 0:
                d.fail(st)
        vo = _lib.oq_verify_options_default()
        vo.threads = threads
        vo.isolated = bool(isolation)
        vo.prepare_reference = _lib.oq_pass_prepare_float_reference
        if tg:
            vo.arith = tg.contents.arith
        v = c_void_p()
        st = _lib.oq_verify_new(fm.m, qm.m, byref(vo), byref(v), byref(d.d))
        if st != OQ_OK:
            d.fail(st, 1 if st in (OQ_ERR_NOMEM, OQ_ERR_INTERNAL) else 2)
        src = c_void_p()
        try:
            fp = _lib.oq_verify_float_plan(v)
            n_in = _lib.oq_plan_n_inputs(fp)
            names = [_lib.oq_plan_input_name(fp, i).decode() for i in range(n_in)]
            ins = (_lib.RtTensor * max(n_in, 1))()
            if isinstance(data, (str, os.PathLike)):
                source = os.fspath(data)
                st = _lib.oq_calib_source_dir(_b(source), byref(src), byref(d.d))
                if st != OQ_OK:
                    d.fail(st)
                label = ctypes.create_string_buffer(4200)
                for k in range(_lib.oq_calib_source_count(src)):
                    st = _lib.oq_calib_source_sample(src, fp, k, ins, n_in, label, len(label), byref(d.d))
                    if st == OQ_OK:
                        st = _call(_lib.oq_verify_sample, v, ins, n_in, label.value, byref(d.d))
                    for i in range(n_in):
                        _lib.oq_rt_tensor_release(byref(ins[i]))
                    if st != OQ_OK:
                        d.fail(st)
            else:
                source = "samples given by the caller"
                for k, sample in enumerate(_samples(data), 1):
                    missing = [n for n in names if n not in sample]
                    if missing:
                        raise UsageError(f"onnxq verify: sample {k}: no array for input \"{missing[0]}\"",
                                         "usage error", 2)
                    keep = [_borrow(n, sample[n], ins[i]) for i, n in enumerate(names)]
                    st = _call(_lib.oq_verify_sample, v, ins, n_in, f"#{k}".encode(), byref(d.d))
                    del keep
                    if st != OQ_OK:
                        d.fail(st)
            passed = True
            if min_sqnr is not None:
                import math
                for i in range(_lib.oq_verify_n_outputs(v)):
                    s = _lib.oq_verify_output_worst(_lib.oq_verify_output_at(v, i), None, None)
                    passed &= not math.isnan(s) and s >= min_sqnr
            info = _lib.VerifyReportInfo(_b(fm.name), _b(qm.name), _b(source), ctypes.cast(tg, c_void_p) if tg else None,
                                         top, min_sqnr is not None, float(min_sqnr or 0), passed, -1, 0)
            text = _lib.oq_verify_report_json(v, byref(info))
            if not text:
                raise MemoryError("onnxq verify: out of memory")
            try:
                report = json.loads(ctypes.string_at(text).decode())
            finally:
                _lib.libc_free(text)
            report["memory"].pop("peak_rss_bytes", None)
            return report
        finally:
            if src:
                _lib.oq_calib_source_free(src)
            _lib.oq_verify_free(v)


# ------------------------------------------------------------------ run, check, opt

def run(model, feeds, *, target="reference", threads=0):
    """Run a model with onnxq's reference executor; returns {output name: numpy array}.

    feeds: {input name: array} (C-contiguous arrays are read in place, not copied). target:
    the arithmetic of quantized groups, as ``onnxq run --target``: reference (default: ONNX
    QDQ semantics), ort-x86 / avx2 (onnxruntime on an AVX2 CPU), ort-x86-vnni / exact, host.
    Outputs are numpy arrays over the library's buffers (no copy).
    """
    tg = _lib.oq_target_find(_b(target))
    if not tg:
        raise UsageError(f"onnxq run: --target \"{target}\": unknown target (one of: "
                         f"{_lib.oq_target_names().decode()})", "usage error", 2)
    with _Diag() as d, _Model(model, d) as m:
        po = _lib.oq_plan_options_default()
        po.threads = threads
        po.arith = tg.contents.arith
        plan = c_void_p()
        st = _lib.oq_plan_compile(m.m, byref(po), byref(plan), byref(d.d))
        changed = ctypes.c_bool(False)
        if st == OQ_ERR_UNSUPPORTED and _lib.oq_model_widen_float16(m.m, byref(changed), None) == OQ_OK \
                and changed.value:  # no float16 kernel for a node: in float32 inside, as `onnxq run`
            _lib.oq_diag_clear(byref(d.d))
            st = _lib.oq_plan_compile(m.m, byref(po), byref(plan), byref(d.d))
        if st != OQ_OK:
            d.fail(st)
        try:
            n_in, n_out = _lib.oq_plan_n_inputs(plan), _lib.oq_plan_n_outputs(plan)
            names = [_lib.oq_plan_input_name(plan, i).decode() for i in range(n_in)]
            missing = [n for n in names if n not in feeds]
            extra = [n for n in feeds if n not in names]
            if missing or extra:
                raise UsageError(f"onnxq run: {m.name}: " + (f"no array for input \"{missing[0]}\"" if missing else
                                 f"the model has no input \"{extra[0]}\"") + f" (inputs: {', '.join(names)})",
                                 "usage error", 2)
            ins = (_lib.RtTensor * max(n_in, 1))()
            keep = [_borrow(n, feeds[n], ins[i]) for i, n in enumerate(names)]
            outs = (_lib.RtTensor * max(n_out, 1))()
            st = _call(_lib.oq_plan_run, plan, ins, n_in, outs, n_out, byref(d.d))
            del keep
            if st != OQ_OK:
                for i in range(n_out):
                    _lib.oq_rt_tensor_release(byref(outs[i]))
                d.fail(st)
            result = {}
            for i in range(n_out):
                t = _lib.RtTensor()
                ctypes.memmove(byref(t), byref(outs[i]), ctypes.sizeof(t))
                result[_lib.oq_plan_output_name(plan, i).decode()] = _to_numpy(t)
            return result
        finally:
            _lib.oq_plan_free(plan)


def check(model):
    """Run onnxq's structural checker (``onnxq check``). Returns the warnings (lines);
    raises BadInputError with the first error's line when the model is invalid."""
    with _Diag() as d, _Model(model, d) as m:
        st = _lib.oq_model_check(m.m, byref(d.d))
        if st != OQ_OK:
            d.fail(st)
        return d.lines(1)


def dump(model, *, stats=False):
    """What ``onnxq dump --json`` prints (docs/dump.md), as a dict: producer, opsets,
    metadata, the op histogram, parameter counts per dtype, the graph (inputs, outputs,
    nodes with their attributes, subgraphs); with stats=True the statistics of every
    initializer and Constant tensor (min, max, mean, std, per output channel for
    Conv/Gemm/MatMul weights)."""
    with _Diag() as d, _Model(model, d) as m:
        buf, n = c_void_p(), c_size_t(0)
        f = _lib.open_memstream(byref(buf), byref(n))
        if not f:
            raise MemoryError("onnxq dump: out of memory")
        res = _lib.InspectJsonResult()
        try:
            st = _lib.oq_inspect_write_json(m.m, _b(m.name), bool(stats), f, None, None, byref(res), byref(d.d))
        finally:
            _lib.fclose(f)
            text = ctypes.string_at(buf, n.value) if buf else b""
            _lib.libc_free(buf)
        if st != OQ_OK:
            if res.stats_failed and not d.entries():
                raise JobError(f"onnxq dump: {m.name}: statistics of a tensor could not be computed", "I/O error", 1)
            d.fail(st, 1)
        return json.loads(text.decode())


def opt(model, passes, output=None):
    """Run a pass pipeline (``onnxq opt --passes``, docs/opt.md) on a model. Returns the
    rewritten model as bytes, or writes it to ``output`` (a path) and returns None."""
    with _Diag() as d, _Model(model, d) as m:
        reg, pl = c_void_p(), c_void_p()
        pos = c_size_t(0)
        try:
            st = _lib.oq_registry_new(byref(reg), byref(d.d))
            if st == OQ_OK:
                st = _lib.oq_pipeline_parse(reg, passes.encode(), byref(pl), byref(pos), byref(d.d))
            if st == OQ_OK:
                st = _call(_lib.oq_pipeline_run, pl, m.m, None, byref(d.d))
            if st != OQ_OK:
                d.fail(st)
            if output is not None:
                st = _lib.oq_model_write(m.m, _b(output), None, byref(d.d))
                if st != OQ_OK:
                    d.fail(st)
                return None
            buf, n = c_void_p(), c_size_t(0)
            st = _lib.oq_model_write_buffer(m.m, byref(buf), byref(n), byref(d.d))
            if st != OQ_OK:
                d.fail(st)
            try:
                return ctypes.string_at(buf, n.value)
            finally:
                _lib.libc_free(buf)
        finally:
            _lib.oq_pipeline_free(pl)
            _lib.oq_registry_free(reg)
