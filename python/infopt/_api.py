"""The Python API: each function runs the command of the same name in this process.

Options are the command's options as keyword arguments (``input_shapes``,
``target``, ``fp16``, ``gates``, ...), checked by the command's own parser, so a
mistake gets the command's one-line message as a :class:`UsageError`.
"""

import contextlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Union,
)

from . import _infopt, _metric
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


def _stage(model: ModelLike, folder: str, name: str) -> _Staged:
    if isinstance(model, (str, os.PathLike)):
        return _Staged("path", os.fspath(model), model)
    if isinstance(model, (bytes, bytearray, memoryview)):
        path = os.path.join(folder, name)
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
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        return _Staged("proto", path, model)
    raise UsageError(
        f"model must be a path, bytes or an onnx.ModelProto, not {type(model).__name__}"
    )


def _dims(value: Any) -> str:
    """An input shape: [1, 3, 224, 224] -> 1x3x224x224; {"batch": 1} -> batch=1."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return "x".join(str(int(d)) for d in value)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_value(v) for v in value)
    return os.fspath(value) if isinstance(value, os.PathLike) else str(value)


def _pairs(flag: str, value: Any) -> List[str]:
    """``{k: v}`` -> flag k=v ...; a string or list of strings is passed as is."""
    if value is None:
        return []
    if isinstance(value, str):
        return [flag, value]
    if isinstance(value, Mapping):
        items = [f"{k}={_value(v)}" for k, v in value.items()]
    else:
        items = [str(v) for v in value]
    return [a for item in items for a in (flag, item)]


def _samples_folder(samples: Iterable[Mapping[str, Any]], folder: str) -> str:
    """Writes an iterable of ``{input_name: array}`` as one .npz per sample, streaming
    (nothing is held in memory), in the folder layout the command reads."""
    import numpy as np

    out = os.path.join(folder, "samples")
    os.makedirs(out)
    count = 0
    for i, sample in enumerate(samples):
        if not isinstance(sample, Mapping):
            raise UsageError(
                f"calibration sample {i} is a {type(sample).__name__}; each sample must be a "
                "dict of input name -> numpy array"
            )
        np.savez(os.path.join(out, f"{i:06d}.npz"), **{k: np.asarray(v) for k, v in sample.items()})
        count += 1
    if count == 0:
        raise UsageError("the calibration data iterable yielded no samples")
    return out


def _data_arg(data: Any, folder: str) -> str:
    """A data option: a path or ``random:N`` as is, else an iterable of samples."""
    if isinstance(data, (str, os.PathLike)):
        return os.fspath(data)
    if isinstance(data, Mapping):
        raise UsageError(
            "calibration data must be a path or an iterable of samples (dicts); got one dict: "
            "wrap it in a list"
        )
    return _samples_folder(data, folder)


def _inputs_arg(inputs: Any, folder: str) -> str:
    """``inputs``: a path, or one ``{input_name: array}`` dict (written as an .npz)."""
    if isinstance(inputs, (str, os.PathLike)):
        return os.fspath(inputs)
    import numpy as np

    path = os.path.join(folder, "inputs.npz")
    np.savez(path, **{k: np.asarray(v) for k, v in inputs.items()})
    return path


def _onnxruntime_library() -> Optional[str]:
    """This interpreter's onnxruntime library, found without importing onnxruntime."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return None
    capi = Path(list(spec.submodule_search_locations)[0]) / "capi"
    found = sorted(capi.glob("libonnxruntime.so*")) + sorted(capi.glob("onnxruntime.dll"))
    found += sorted(capi.glob("libonnxruntime*.dylib"))
    return str(found[0]) if found else None


def _options(options: Dict[str, Any], folder: str, runs_models: bool) -> List[str]:
    """Keyword options as the command's flags."""
    args: List[str] = []
    opts = dict(options)
    pipeline = opts.pop("pipeline", None)
    if isinstance(pipeline, Mapping):
        path = os.path.join(folder, "pipeline.yaml")
        # JSON is YAML: the pipeline file format, unchanged.
        with open(path, "w") as f:
            json.dump(pipeline, f)
        args += ["--config", path]
    elif pipeline is not None:
        args += ["--config", os.fspath(pipeline)]
    passes = opts.pop("passes", None)
    if passes is not None:
        args += ["--passes", passes if isinstance(passes, str) else ",".join(passes)]
    verify = opts.pop("verify", True)
    if verify is False:
        args.append("--no-verify")
    shapes = opts.pop("input_shapes", None)
    if isinstance(shapes, Mapping):
        for name, dims in shapes.items():
            args += ["--input-shape", f"{name}:{_dims(dims)}"]
    elif shapes is not None:
        args += _pairs("--input-shape", shapes)
    args += _pairs("--precision", opts.pop("precision", None))
    args += _pairs("--gate", opts.pop("gates", None))
    for key in ("calib_data", "data"):
        if opts.get(key) is not None:
            args += [f"--{key.replace('_', '-')}", _data_arg(opts.pop(key), folder)]
    if opts.get("inputs") is not None:
        args += ["--inputs", _inputs_arg(opts.pop("inputs"), folder)]
    report = opts.pop("report", None)
    if report is not None:
        reports = [report] if isinstance(report, (str, os.PathLike)) else report
        for r in reports:
            args += ["--report", os.fspath(r)]
    if (
        runs_models
        and opts.get("ort_dylib") is None
        and not os.environ.get("ORT_DYLIB_PATH")
    ):
        # The onnxruntime of this interpreter, not of whatever python3 is on PATH.
        lib = _onnxruntime_library()
        if lib:
            args += ["--ort-dylib", lib]
    for key, value in opts.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)) and key in ("compare", "shapes"):
            # Repeatable flags without a comma list.
            for v in value:
                args += [flag, _value(v)]
        else:
            args += [flag, _value(value)]
    return args


class _ProgressPrinter:
    def __call__(self, stage: str, line: str) -> None:
        if stage not in ("pass", "calibrate"):
            print(line, file=sys.stderr)


def _run(args: Sequence[str], progress: Progress, check: bool = True, metric: Any = None) -> Report:
    callback = _ProgressPrinter() if progress is True else (progress or None)
    if metric is None:
        code, message, rendered = _infopt.run(list(args), callback)
    else:
        code, message, rendered = _infopt.run(list(args), callback, _metric.adapter(metric))
    report = Report(*rendered) if rendered is not None else None
    if code != 0 and (check or report is None):
        raise from_exit(code, message or "failed", report)
    if report is None:
        raise from_exit(1, "the command returned no report", None)
    return report


@contextlib.contextmanager
def _workspace() -> Iterator[str]:
    with tempfile.TemporaryDirectory(prefix="infopt-") as folder:
        yield folder


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
    with _workspace() as folder:
        staged = _stage(model, folder, "model.onnx")
        if output is not None:
            out = os.fspath(output)
        elif staged.in_memory:
            out = os.path.join(folder, "model.opt.onnx")
        else:
            out = _default_output(staged.path, ".opt.onnx")
        args = ["optimize", staged.path, "--output", out]
        if staged.in_memory and not any(
            k in options for k in ("external_data", "inline", "data_file")
        ):
            # Bytes and ModelProto hold every tensor inside.
            args.append("--inline")
        args += _options(options, folder, runs_models=True)
        report = _run(args, progress, metric=metric)
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
    with _workspace() as folder:
        staged = _stage(model, folder, "model.onnx")
        args = ["build-engine", staged.path]
        if output is not None:
            args += ["--output", os.fspath(output)]
        elif staged.in_memory and options.get("emit_onnx") is None:
            raise UsageError("give output=PATH for the engine of a model passed in memory")
        args += _options(options, folder, runs_models=True)
        return _run(args, progress)


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
    ``{input_name: numpy array}`` (streamed to disk, one sample at a time). Options:
    ``method`` ("entropy", "minmax", "percentile", "mse"), ``samples``, ``batch``,
    ``trt_cache``, ``input_shapes``, ``backend``."""
    with _workspace() as folder:
        staged = _stage(model, folder, "model.onnx")
        args = ["calibrate", staged.path, "--output", os.fspath(output)]
        args += ["--data", _data_arg(data, folder)]
        args += _options(options, folder, runs_models=True)
        return _run(args, progress)


def inspect(model: ModelLike) -> Report:
    """What a model contains (``infopt inspect``): inputs and outputs, opsets, op
    histogram, parameters, external data."""
    with _workspace() as folder:
        staged = _stage(model, folder, "model.onnx")
        return _run(["inspect", staged.path], None)


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
    with _workspace() as folder:
        sa = _stage(a, folder, "a.onnx")
        sb = _stage(b, folder, "b.onnx")
        args = ["compare", sa.path, sb.path] + _options(options, folder, runs_models=True)
        return _run(args, progress, check)


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
    with _workspace() as folder:
        staged = _stage(model, folder, "model.onnx")
        others = options.pop("compare", None) or []
        if isinstance(others, (str, os.PathLike, bytes)) or _is_model_proto(others):
            others = [others]
        args = ["bench", staged.path]
        for i, other in enumerate(others):
            args += ["--compare", _stage(other, folder, f"compare{i}.onnx").path]
        args += _options(options, folder, runs_models=True)
        return _run(args, progress, check)
