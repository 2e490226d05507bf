# Type hints of the onnxq package (python/onnxq/__init__.py; docs/python.md).
import os
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol, Union

import numpy as np

__version__: str

class _Reader(Protocol):
    def get_next(self) -> Optional[Mapping[str, np.ndarray]]: ...

ModelInput = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, Any]  # Any: onnx.ModelProto
Samples = Union[_Reader, Iterable[Mapping[str, np.ndarray]], str, "os.PathLike[str]"]

QUANTIZE_OPTIONS: dict[str, tuple[str, str]]

class Error(Exception):
    status: str
    exit_code: int
    lines: list[str]
    def __init__(self, message: str, status: str = ..., exit_code: int = ..., lines: Iterable[str] = ...) -> None: ...

class BadInputError(Error): ...
class UsageError(Error, ValueError): ...
class JobError(Error): ...

def quantize(model_input: ModelInput, model_output: Union[str, "os.PathLike[str]"],
             calibration_data_reader: Optional[Samples] = None, *, target: str = "ort-x86", mode: str = "static",
             progress: Union[None, bool, Callable[[str, int, int], None]] = None,
             log: Optional[Callable[[str], None]] = None, **options: Any) -> dict[str, Any]: ...
def verify(float_model: ModelInput, quant_model: ModelInput, data: Samples, *, target: str = "reference",
           isolation: bool = True, min_sqnr: Optional[float] = None, top: int = 10,
           threads: int = 0) -> dict[str, Any]: ...
def run(model: ModelInput, feeds: Mapping[str, np.ndarray], *, target: str = "reference",
        threads: int = 0) -> dict[str, np.ndarray]: ...
def check(model: ModelInput) -> list[str]: ...
def dump(model: ModelInput, *, stats: bool = False) -> dict[str, Any]: ...
def opt(model: ModelInput, passes: str, output: Union[None, str, "os.PathLike[str]"] = None) -> Optional[bytes]: ...
