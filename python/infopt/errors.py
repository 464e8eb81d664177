"""Exceptions by kind. Each carries the command's one-line message and its exit
code; a failed verification or gate also carries the report that says what failed."""

from typing import Optional

from .report import Report


class InfoptError(Exception):
    """Any failure of an infopt call. ``str(e)`` is the command's one-line message."""

    #: The exit code the ``infopt`` command gives for this failure.
    exit_code: int = 1

    def __init__(self, message: str, report: Optional[Report] = None):
        super().__init__(message)
        self.message = message
        #: The report, when the command got far enough to have one.
        self.report = report


class UsageError(InfoptError, ValueError):
    """Bad options or pipeline (exit 2), or an output that would overwrite the input."""

    exit_code = 2


class ModelError(InfoptError):
    """The model cannot be read: missing, not ONNX, invalid, bad external data (exit 3)."""

    exit_code = 3


class VerificationError(InfoptError):
    """The optimized model does not compute the original's outputs within tolerance
    (exit 4), or no backend could run it to check (exit 7). Nothing was written."""

    exit_code = 4


class GateError(InfoptError):
    """A release gate failed (exit 5); ``e.report.gates`` has every gate's value."""

    exit_code = 5


class WriteError(InfoptError, OSError):
    """The output could not be written (exit 6)."""

    exit_code = 6


class RuntimeMissingError(InfoptError):
    """A runtime the call needs is not installed (exit 8): TensorRT for ``build_engine``,
    ONNX Runtime when asked for. The message says how to get it."""

    exit_code = 8


class InternalError(InfoptError):
    """A bug in infopt (exit 1); please report it with the model."""

    exit_code = 1


_BY_CODE = {
    1: InternalError,
    2: UsageError,
    3: ModelError,
    4: VerificationError,
    5: GateError,
    6: WriteError,
    7: VerificationError,
    8: RuntimeMissingError,
}


def from_exit(code: int, message: str, report: Optional[Report]) -> InfoptError:
    """The exception for a command's exit code."""
    cls = _BY_CODE.get(code, InternalError)
    err = cls(message, report)
    err.exit_code = code
    return err
