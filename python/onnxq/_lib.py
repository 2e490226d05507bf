"""ctypes bindings of libonnxq's public C API (include/onnxq/*.h), as the package uses them.

Only argument conversion lives here: every job is a library call. ctypes releases the GIL
for the duration of each foreign call, so long work (quantize, run) does not hold it.
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char_p, c_double, c_int, c_int32, c_int64,
                    c_size_t, c_uint64, c_void_p)
from pathlib import Path

OQ_RT_MAX_RANK = 8


class DiagEntry(Structure):
    _fields_ = [("severity", c_int), ("code", c_int), ("file", c_char_p), ("node", c_char_p), ("op", c_char_p),
                ("message", c_char_p), ("weight", c_double)]


class Diag(Structure):
    _fields_ = [("entries", POINTER(DiagEntry)), ("count", c_size_t), ("cap", c_size_t), ("errors", c_size_t),
                ("warnings", c_size_t), ("file", c_char_p), ("sink", c_void_p), ("sink_user", c_void_p)]


class RtTensor(Structure):
    _fields_ = [("dtype", c_int32), ("rank", c_size_t), ("dims", c_int64 * OQ_RT_MAX_RANK), ("data", c_void_p),
                ("nbytes", c_int64), ("owned", c_bool)]


class PlanOptions(Structure):
    _fields_ = [("threads", c_int), ("on_tensor", c_void_p), ("user", c_void_p), ("arith", c_int),
                ("no_fold", c_bool), ("on_input", c_void_p)]


class QuantizeResult(Structure):
    _fields_ = [("config", c_void_p), ("summary", c_void_p), ("pipeline", c_void_p), ("fallback_met", c_bool),
                ("exit_code", c_int)]


LOG_FN = CFUNCTYPE(None, c_char_p, c_void_p)
PROGRESS_FN = CFUNCTYPE(None, c_char_p, c_uint64, c_uint64, c_void_p)


def _find_library():
    env = os.environ.get("ONNXQ_LIBRARY")
    if env:
        return env
    here = Path(__file__).resolve().parent
    for name in ("libonnxq_native.so", "libonnxq.so"):
        if (here / name).exists():
            return str(here / name)
    raise ImportError(f"onnxq: the native library is not in {here} (set ONNXQ_LIBRARY to a libonnxq.so)")


lib = ctypes.CDLL(_find_library())


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


PDiag = POINTER(Diag)
PRt = POINTER(RtTensor)
# status.h
oq_status_name = _fn("oq_status_name", c_char_p, c_int)
oq_diag_init = _fn("oq_diag_init", None, PDiag)
oq_diag_free = _fn("oq_diag_free", None, PDiag)
oq_diag_clear = _fn("oq_diag_clear", None, PDiag)
oq_diag_format = _fn("oq_diag_format", c_int, POINTER(DiagEntry), c_char_p, c_size_t)
oq_stop_request = _fn("oq_stop_request", None)
oq_stop_clear = _fn("oq_stop_clear", None)
# ir.h
oq_model_read = _fn("oq_model_read", c_int, c_char_p, c_void_p, POINTER(c_void_p), PDiag)
oq_model_read_buffer = _fn("oq_model_read_buffer", c_int, c_char_p, c_size_t, c_char_p, c_void_p,
                           POINTER(c_void_p), PDiag)
oq_model_write = _fn("oq_model_write", c_int, c_void_p, c_char_p, c_void_p, PDiag)
oq_model_write_buffer = _fn("oq_model_write_buffer", c_int, c_void_p, POINTER(c_void_p), POINTER(c_size_t), PDiag)
oq_model_free = _fn("oq_model_free", None, c_void_p)
oq_model_check = _fn("oq_model_check", c_int, c_void_p, PDiag)
# pass.h
oq_registry_new = _fn("oq_registry_new", c_int, POINTER(c_void_p), PDiag)
oq_registry_free = _fn("oq_registry_free", None, c_void_p)
oq_pipeline_parse = _fn("oq_pipeline_parse", c_int, c_void_p, c_char_p, POINTER(c_void_p), POINTER(c_size_t), PDiag)
oq_pipeline_run = _fn("oq_pipeline_run", c_int, c_void_p, c_void_p, c_void_p, PDiag)
oq_pipeline_free = _fn("oq_pipeline_free", None, c_void_p)
# exec.h
oq_plan_options_default = _fn("oq_plan_options_default", PlanOptions)
oq_plan_compile = _fn("oq_plan_compile", c_int, c_void_p, POINTER(PlanOptions), POINTER(c_void_p), PDiag)
oq_plan_free = _fn("oq_plan_free", None, c_void_p)
oq_plan_n_inputs = _fn("oq_plan_n_inputs", c_size_t, c_void_p)
oq_plan_n_outputs = _fn("oq_plan_n_outputs", c_size_t, c_void_p)
oq_plan_input_name = _fn("oq_plan_input_name", c_char_p, c_void_p, c_size_t)
oq_plan_output_name = _fn("oq_plan_output_name", c_char_p, c_void_p, c_size_t)
oq_plan_run = _fn("oq_plan_run", c_int, c_void_p, PRt, c_size_t, PRt, c_size_t, PDiag)
oq_rt_tensor_release = _fn("oq_rt_tensor_release", None, PRt)
# target.h
oq_target_find = _fn("oq_target_find", c_void_p, c_char_p)
# calib.h
oq_calib_source_feed = _fn("oq_calib_source_feed", c_int, POINTER(c_void_p), PDiag)
oq_calib_source_feed_add = _fn("oq_calib_source_feed_add", c_int, c_void_p, POINTER(c_char_p), PRt, c_size_t, PDiag)
oq_calib_source_count = _fn("oq_calib_source_count", c_uint64, c_void_p)
oq_calib_source_free = _fn("oq_calib_source_free", None, c_void_p)
oq_calib_progress_set_hook = _fn("oq_calib_progress_set_hook", None, c_void_p, c_void_p)
# quantize.h
oq_quantize_options_new = _fn("oq_quantize_options_new", c_void_p)
oq_quantize_options_delete = _fn("oq_quantize_options_delete", None, c_void_p)
oq_quantize_options_load = _fn("oq_quantize_options_load", c_int, c_void_p, c_char_p, c_size_t, c_char_p, c_bool,
                               PDiag)
oq_quantize_options_load_file = _fn("oq_quantize_options_load_file", c_int, c_void_p, c_char_p, c_bool, PDiag)
oq_quantize_options_set_source = _fn("oq_quantize_options_set_source", None, c_void_p, c_void_p)
oq_quantize_options_set_log = _fn("oq_quantize_options_set_log", None, c_void_p, c_void_p, c_void_p, c_bool)
oq_quantize = _fn("oq_quantize", c_int, c_char_p, c_char_p, c_void_p, POINTER(QuantizeResult), PDiag)
oq_quantize_buffer = _fn("oq_quantize_buffer", c_int, c_char_p, c_size_t, c_char_p, c_char_p, c_void_p,
                         POINTER(QuantizeResult), PDiag)
oq_quantize_result_free = _fn("oq_quantize_result_free", None, POINTER(QuantizeResult))
oq_quantize_exit_code = _fn("oq_quantize_exit_code", c_int, c_int)
libc_free = ctypes.CDLL(None).free
libc_free.argtypes = [c_void_p]
libc_free.restype = None


class Target(Structure):
    _fields_ = [("name", c_char_p), ("summary", c_char_p), ("act_dtype", c_int32), ("weight_dtype", c_int32),
                ("weight_symmetric", c_bool), ("op_types", c_char_p), ("placement", ctypes.c_uint32),
                ("arith", c_int), ("alias_of", c_char_p)]


oq_target_find.restype = POINTER(Target)
oq_target_names = _fn("oq_target_names", c_char_p)


class VerifyOptions(Structure):
    _fields_ = [("threads", c_int), ("isolated", c_bool), ("class_topk", c_int), ("arith", c_int),
                ("arith_loss", c_bool), ("prepare_reference", c_void_p), ("prepare_user", c_void_p),
                ("float_ranges", c_bool)]


class VerifyReportInfo(Structure):
    _fields_ = [("float_model", c_char_p), ("quant_model", c_char_p), ("source", c_char_p), ("target", c_void_p),
                ("top", c_int), ("has_min", c_bool), ("min_sqnr", c_double), ("pass_", c_bool),
                ("peak_rss_bytes", c_int64), ("indent", c_int)]


# verify.h
oq_verify_options_default = _fn("oq_verify_options_default", VerifyOptions)
oq_verify_new = _fn("oq_verify_new", c_int, c_void_p, c_void_p, POINTER(VerifyOptions), POINTER(c_void_p), PDiag)
oq_verify_free = _fn("oq_verify_free", None, c_void_p)
oq_verify_float_plan = _fn("oq_verify_float_plan", c_void_p, c_void_p)
oq_verify_sample = _fn("oq_verify_sample", c_int, c_void_p, PRt, c_size_t, c_char_p, PDiag)
oq_verify_n_outputs = _fn("oq_verify_n_outputs", c_size_t, c_void_p)
oq_verify_output_at = _fn("oq_verify_output_at", c_void_p, c_void_p, c_size_t)
oq_verify_output_worst = _fn("oq_verify_output_worst", c_double, c_void_p, c_void_p, c_void_p)
oq_verify_report_json = _fn("oq_verify_report_json", c_void_p, c_void_p, POINTER(VerifyReportInfo))
oq_pass_prepare_float_reference = ctypes.cast(lib.oq_pass_prepare_float_reference, c_void_p)
oq_model_widen_float16 = _fn("oq_model_widen_float16", c_int, c_void_p, POINTER(ctypes.c_bool), PDiag)
oq_calib_source_dir = _fn("oq_calib_source_dir", c_int, c_char_p, POINTER(c_void_p), PDiag)
oq_calib_source_sample = _fn("oq_calib_source_sample", c_int, c_void_p, c_void_p, c_uint64, PRt, c_size_t, c_char_p,
                             c_size_t, PDiag)


class InspectJsonResult(Structure):
    _fields_ = [("incomplete", c_bool), ("oom", c_bool), ("stats_failed", c_bool)]


# inspect.h
oq_inspect_write_json = _fn("oq_inspect_write_json", c_int, c_void_p, c_char_p, c_bool, c_void_p, c_void_p, c_void_p,
                            POINTER(InspectJsonResult), PDiag)
_libc = ctypes.CDLL(None)
open_memstream = _libc.open_memstream
open_memstream.restype = c_void_p
open_memstream.argtypes = [POINTER(c_void_p), POINTER(c_size_t)]
fclose = _libc.fclose
fclose.restype = c_int
fclose.argtypes = [c_void_p]
