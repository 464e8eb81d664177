"""infopt: offline ONNX optimizer, in Python.

    import infopt
    model, report = infopt.optimize(model)            # ModelProto in, ModelProto out
    model, report = infopt.optimize("m.onnx", fp16=True, input_shapes={"x": [1, 3, 224, 224]})
    print(report)                                      # the command's table

Every function runs the command of the same name (``infopt optimize``, ``infopt
build-engine``, ...) in this process, with the GIL released: the same passes, the
same verification, the same one-line errors, as exceptions by kind (all
:class:`InfoptError`).
"""

from ._api import Optimized, bench, build_engine, calibrate, compare, inspect, optimize
from ._infopt import __version__
from .errors import (
    GateError,
    InfoptError,
    InternalError,
    ModelError,
    RuntimeMissingError,
    UsageError,
    VerificationError,
    WriteError,
)
from .report import Report

__all__ = [
    "optimize",
    "build_engine",
    "calibrate",
    "inspect",
    "compare",
    "bench",
    "Optimized",
    "Report",
    "InfoptError",
    "UsageError",
    "ModelError",
    "VerificationError",
    "GateError",
    "WriteError",
    "RuntimeMissingError",
    "InternalError",
    "__version__",
]
