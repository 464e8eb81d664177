"""The Python API: each function runs the command of the same name in this process.

Options are the command's options as keyword arguments (``input_shapes``,
``target``, ``fp16``, ``gates``, ...): the native module builds the command's options
from them directly (no command line in between), so an unknown keyword or a value it
cannot take is a one-line :class:`UsageError` naming the keyword. Calibration samples
from a Python iterable and ``inputs`` given as arrays are read in memory, without files.
"""

import contextlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Mapping, NamedTuple, Optional, Union

from . import _infopt, _metric, _samples
from .errors import UsageError, from_exit
from .report import Report

#: A model: a path to an .onnx file (external data beside it is read from its folder),
#: the serialized bytes, or an ``onnx.ModelProto``.
ModelLike = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, Any]
#: ``progress(stage, line)``, or True to print the lines to stderr like the command.
Progress = Union[None, bool, Callable[[str, str], Any]]

# protobuf cannot serialize a message of 2 GiB or more.
_PROTOBUF_LIMIT = 2**31 - 1


class Optimized(NamedTuple):
    """What :func:`optimize` returns: the model, of the kind given, and the report."""

    model: Any
    report: Report


def _is_model_proto(obj: Any) -> bool:
    return hasattr(obj, "SerializeToString") and hasattr(obj, "graph")


def _has_external_refs(proto: Any) -> bool:
    external = 1  # onnx.TensorProto.EXTERNAL
    return any(t.data_location == external for t in proto.graph.initializer)


class _Staged:
    """A model argument as the command sees it: a path (in a temporary folder when it
    came as bytes or a ModelProto), and how to hand the result back in the same kind."""

    def __init__(self, kind: str, path: str, given: Any):
        self.kind = kind
        self.path = path
        self.given = given

    @property
    def in_memory(self) -> bool:
        return self.kind != "path"

    def result(self, output: str) -> Any:
        """The written output, in the kind the model came as."""
        if self.kind == "path":
            return type(self.given)(output) if isinstance(self.given, Path) else output
        if self.kind == "bytes":
            return Path(output).read_bytes()
        import onnx

        return onnx.load(output)


def _stage(model: ModelLike, space: "_Workspace", name: str) -> _Staged:
    """The model as a path. Bytes and ModelProtos are written to a temporary file: the
    commands read a model (and its external data) by path, and write it to one."""
    if isinstance(model, (str, os.PathLike)):
        return _Staged("path", os.fspath(model), model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        path = os.path.join(space.folder, name)
        with open(path, "wb") as f:
            f.write(model)
        return _Staged("bytes", path, model)
    if _is_model_proto(model):
        if _has_external_refs(model):
            raise UsageError(
                "this ModelProto's tensors refer to external data files (loaded with "
                "load_external_data=False); pass the model's path, so they are read from its folder"
            )
        size = model.ByteSize()
        if size > _PROTOBUF_LIMIT:
            raise UsageError(
                f"this ModelProto is {size} bytes, over protobuf's 2 GiB limit; save it with "
                "external data and pass its path"
            )
        path = os.path.join(space.folder, name)
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        return _Staged("proto", path, model)
    raise UsageError(
        f"model must be a path, bytes or an onnx.ModelProto, not {type(model).__name__}"
    )


def _onnxruntime_library() -> Optional[str]:
    """This interpreter's onnxruntime library, found without importing onnxruntime."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    capi = Path(list(spec.submodule_search_locations)[0]) / "capi"
    found = sorted(capi.glob("libonnxruntime.so*")) + sorted(capi.glob("onnxruntime.dll"))
    found += sorted(capi.glob("libonnxruntime*.dylib"))
    return str(found[0]) if found else None


def _jsonable(value: Any) -> Any:
    """Values JSON has no form for: paths as text, numpy scalars and arrays as numbers."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise UsageError(f"an option's value cannot be {type(value).__name__} ({value!r})")


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


class _ProgressPrinter:
    def __call__(self, stage: str, line: str) -> None:
        if stage not in ("pass", "calibrate"):
            print(line, file=sys.stderr)


def _run(
    command: str,
    keywords: Dict[str, Any],
    progress: Progress,
    check: bool = True,
    metric: Any = None,
    runs_models: bool = True,
) -> Report:
    """Runs ``command`` with the keywords as its options (no command line): the native
    module builds the options from them and names any it cannot take."""
    keywords = dict(keywords)
    data = None
    for key in ("calib_data", "data"):
        value = keywords.get(key)
        if value is not None and not _is_path(value):
            # Streamed from the iterable as the command reads it: no files.
            data = _samples.Samples(keywords.pop(key))
    inputs = keywords.get("inputs")
    arrays = None
    if inputs is not None and not _is_path(inputs):
        if not isinstance(inputs, Mapping):
            raise UsageError(
                f"inputs must be a path or a dict of input name -> numpy array, not "
                f"{type(inputs).__name__}"
            )
        arrays = _samples.raw(keywords.pop("inputs"), "inputs")
    if runs_models and keywords.get("ort_dylib") is None and not os.environ.get("ORT_DYLIB_PATH"):
        # The onnxruntime of this interpreter, not of whatever python3 is on PATH.
        lib = _onnxruntime_library()
        if lib:
            keywords["ort_dylib"] = lib
    text = json.dumps(keywords, default=_jsonable)
    callback = _ProgressPrinter() if progress is True else (progress or None)
    scorer = None if metric is None else _metric.adapter(metric)
    code, message, rendered = _infopt.run(command, text, data, arrays, callback, scorer)
    report = Report(*rendered) if rendered is not None else None
    if code != 0 and (check or report is None):
        raise from_exit(code, message or "failed", report)
    if report is None:
        raise from_exit(1, "the command returned no report", None)
    return report


class _Workspace:
    """A temporary folder, made only when a model given in memory needs a file: a model
    given by path, samples and arrays never touch the disk."""

    def __init__(self) -> None:
        self._dir: Optional[tempfile.TemporaryDirectory] = None

    @property
    def folder(self) -> str:
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="infopt-")
        return self._dir.name

    def close(self) -> None:
        if self._dir is not None:
            self._dir.cleanup()


@contextlib.contextmanager
def _workspace() -> Iterator[_Workspace]:
    space = _Workspace()
    try:
        yield space
    finally:
        space.close()


def _default_output(path: str, suffix: str) -> str:
    stem = Path(path).stem or "model"
    return str(Path(path).with_name(f"{stem}{suffix}"))


def optimize(
    model: ModelLike,
    output: Optional[Union[str, "os.PathLike[str]"]] = None,
    *,
    progress: Progress = None,
    **options: Any,
) -> Optimized:
    """Optimizes a model: the pipeline's passes, verification against the original,
    then the output (written only when it agrees).

    ``model`` is a path, bytes or an ``onnx.ModelProto``; the optimized model comes
    back as the same kind (a path for a path: ``output``, default ``MODEL.opt.onnx``).
    Models with external data or over 2 GiB: pass the path (nothing is copied through
    memory).

    Options mirror ``infopt optimize``: ``pipeline`` (a YAML path or a dict),
    ``passes``, ``disable``, ``target`` ("portable", "onnxruntime", "tensorrt"),
    ``input_shapes`` ({"x": [1, 3, 224, 224]} or {"ids": {"batch": 1}}), ``fp16``,
    ``bf16``, ``precision`` ({"Softmax": "fp32"}), ``int8`` with ``calib_data`` (a
    folder, or an iterable of {input_name: array}; ``metric=f`` with
    ``int8_max_drop=D``: your own accuracy target, see ``infopt._metric``),
    ``verify=False``, ``rtol``,
    ``atol``, ``gates`` ({"min_cosine": 0.999, "max_nodes": 500}), ``bench``,
    ``backend``, ``report`` (paths to write: .json, .md, .xml), and the rest by the
    command's flag names.

    Returns ``(model, report)``. Raises :class:`VerificationError` when the result
    does not agree, :class:`GateError` when a gate fails (``e.report`` says which),
    :class:`UsageError`, :class:`ModelError`, :class:`RuntimeMissingError`.
    """
    metric = options.pop("metric", None)
    with _workspace() as space:
        staged = _stage(model, space, "model.onnx")
        if output is not None:
            out = os.fspath(output)
        elif staged.in_memory:
            out = os.path.join(space.folder, "model.opt.onnx")
        else:
            out = _default_output(staged.path, ".opt.onnx")
        keywords = dict(options, model=staged.path, output=out)
        if staged.in_memory and not any(
            k in options for k in ("external_data", "inline", "data_file")
        ):
            # Bytes and ModelProto hold every tensor inside.
            keywords["inline"] = True
        report = _run("optimize", keywords, progress, metric=metric)
        return Optimized(staged.result(out), report)


def build_engine(
    model: ModelLike,
    output: Optional[Union[str, "os.PathLike[str]"]] = None,
    *,
    progress: Progress = None,
    **options: Any,
) -> Report:
    """Builds a TensorRT engine (``infopt build-engine``): the tensorrt pipeline,
    precision as graph passes (``fp16``, ``bf16``, ``precision``, ``int8`` with
    ``calib_data``), verification, then the engine at ``output`` (default
    ``MODEL.engine``; required for a model given as bytes or ModelProto). With
    ``emit_onnx=PATH``, writes the ONNX and the trtexec commands instead (no TensorRT
    needed). Raises :class:`RuntimeMissingError` when TensorRT is not installed."""
    with _workspace() as space:
        staged = _stage(model, space, "model.onnx")
        keywords = dict(options, model=staged.path)
        if output is not None:
            keywords["output"] = os.fspath(output)
        elif staged.in_memory and options.get("emit_onnx") is None:
            raise UsageError("give output=PATH for the engine of a model passed in memory")
        return _run("build-engine", keywords, progress)


def calibrate(
    model: ModelLike,
    data: Any,
    output: Union[str, "os.PathLike[str]"],
    *,
    progress: Progress = None,
    **options: Any,
) -> Report:
    """Runs the model over calibration data and writes the activation range table to
    ``output`` (``infopt calibrate``). ``data`` is a folder of .npz/.npy samples, an
    image folder (with ``preprocess``), ``"random:N"``, or any iterable of
    ``{input_name: numpy array}`` (read in memory as the command goes, no files; a
    generator's samples are kept for the command's second reading). Options:
    ``method`` ("entropy", "minmax", "percentile", "mse"), ``samples``, ``batch``,
    ``trt_cache``, ``input_shapes``, ``backend``."""
    with _workspace() as space:
        staged = _stage(model, space, "model.onnx")
        keywords = dict(options, model=staged.path, output=os.fspath(output), data=data)
        return _run("calibrate", keywords, progress)


def inspect(model: ModelLike) -> Report:
    """What a model contains (``infopt inspect``): inputs and outputs, opsets, op
    histogram, parameters, external data."""
    with _workspace() as space:
        staged = _stage(model, space, "model.onnx")
        return _run("inspect", {"model": staged.path}, None, runs_models=False)


def compare(
    a: ModelLike,
    b: ModelLike,
    *,
    check: bool = True,
    progress: Progress = None,
    **options: Any,
) -> Report:
    """Runs two models on the same inputs and compares their outputs (``infopt
    compare``; ``a`` is the reference). Options: ``rtol``, ``atol``, ``intermediate``
    (name the first diverging tensor), ``gates``, ``inputs`` (a path or a dict of
    arrays), ``input_shapes``, ``backend``. Raises :class:`VerificationError` on a
    mismatch and :class:`GateError` on a failed gate, unless ``check=False`` (then
    read ``report.passed``)."""
    with _workspace() as space:
        sa = _stage(a, space, "a.onnx")
        sb = _stage(b, space, "b.onnx")
        keywords = dict(options, a=sa.path, b=sb.path)
        return _run("compare", keywords, progress, check)


def bench(
    model: ModelLike,
    *,
    check: bool = True,
    progress: Progress = None,
    **options: Any,
) -> Report:
    """Times a model in a backend (``infopt bench``): median, p90, p99, throughput.
    ``compare=[other, ...]`` times other models interleaved with it; ``runs``,
    ``warmup``, ``backend``, ``threads``, ``input_shapes``, ``gates``
    ({"max_latency_ratio": 1.05}). Raises :class:`GateError` on a failed gate unless
    ``check=False``."""
    with _workspace() as space:
        staged = _stage(model, space, "model.onnx")
        others = options.pop("compare", None) or []
        if isinstance(others, (str, os.PathLike, bytes)) or _is_model_proto(others):
            others = [others]
        paths = [_stage(o, space, f"compare{i}.onnx").path for i, o in enumerate(others)]
        keywords = dict(options, model=staged.path, compare=paths)
        return _run("bench", keywords, progress, check)

