"""Shared helpers for the interop tests (imported by conftest.py and the tests)."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import Message

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"
MODELS = FIXTURES / "models"
BAD = FIXTURES / "bad"

# Fixtures that ONNX Runtime is not expected to load, and why. Any other
# fixture that ORT cannot load is a broken fixture and fails the tests.
ORT_CANNOT_RUN = {
    "custom_domain.onnx": "com.example op unknown to ORT",
    "kitchen_sink.onnx": "custom-domain op, IR 14 (ORT 1.31 reads up to IR 13)",
}

CLI_TIMEOUT_S = 120

# (fixture id, note) pairs filled by test_roundtrip.py; conftest prints them at the end.
BYTE_REPORT: list[tuple[str, str]] = []


def good_fixtures() -> list[Path]:
    return sorted(MODELS.glob("**/*.onnx"))


def fixture_id(p: Path) -> str:
    return p.relative_to(MODELS).as_posix()


def infopt_bin() -> Path:
    """$INFOPT_BIN (a relative path is taken from the repo root), default target/debug/infopt."""
    raw = os.environ.get("INFOPT_BIN", "target/debug/infopt")
    p = Path(raw)
    return p if p.is_absolute() else REPO / p


# A debug build's bound below which the INT8 speed check does not time a float model
# (ops/src/int8/speed.rs::min_float_ms): the tests' small models must not give way to
# float on a loaded machine's noise.
TEST_ENV = {"INFOPT_TEST_MIN_FLOAT_MS": "0.25"}


def run_cli(*args: str | os.PathLike) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(infopt_bin()), *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=CLI_TIMEOUT_S, cwd=REPO, env={**os.environ, **TEST_ENV},
    )


def describe(proc: subprocess.CompletedProcess) -> str:
    return (f"exit code {proc.returncode}\n--- stdout ---\n{proc.stdout[-4000:]}"
            f"\n--- stderr ---\n{proc.stderr[-4000:]}")


# ---------------------------------------------------------------- protobuf

def proto_diff(a: Message, b: Message, path: str = "model", limit: int = 20) -> list[str]:
    """Human-readable list of the first differences between two messages."""
    out: list[str] = []
    _diff(a, b, path, out, limit)
    return out


def _short(v) -> str:
    s = repr(v)
    return s if len(s) <= 120 else s[:117] + "..."


def _diff(a, b, path: str, out: list[str], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, Message):
        if a == b:
            return
        fields = {f.name: f for f, _ in a.ListFields()} | {f.name: f for f, _ in b.ListFields()}
        for name in sorted(fields, key=lambda n: fields[n].number):
            fd = fields[name]
            va, vb = getattr(a, name), getattr(b, name)
            if fd.is_repeated:
                if len(va) != len(vb):
                    out.append(f"{path}.{name}: {len(va)} entries vs {len(vb)}")
                for i, (x, y) in enumerate(zip(va, vb)):
                    label = getattr(x, "name", "") if isinstance(x, Message) else ""
                    _diff(x, y, f"{path}.{name}[{i}{'=' + label if label else ''}]", out, limit)
            else:
                has_a = a.HasField(name) if fd.message_type or fd.has_presence else True
                has_b = b.HasField(name) if fd.message_type or fd.has_presence else True
                if has_a != has_b:
                    out.append(f"{path}.{name}: {'set' if has_a else 'unset'} vs {'set' if has_b else 'unset'}")
                elif isinstance(va, Message):
                    _diff(va, vb, f"{path}.{name}", out, limit)
                elif va != vb:
                    out.append(f"{path}.{name}: {_short(va)} vs {_short(vb)}")
    elif a != b:
        out.append(f"{path}: {_short(a)} vs {_short(b)}")


def load_full(path: Path) -> onnx.ModelProto:
    """Load a model with its external data folded in, so that an inline tensor
    and the same tensor stored externally compare equal.

    onnx's own loader leaves data_location explicitly set to DEFAULT on tensors
    it read from a side file, which an inline original does not have; clear
    it on exactly those tensors.
    """
    from onnx.external_data_helper import load_external_data_for_tensor
    m = onnx.load(str(path), load_external_data=False)
    for t in external_tensors(m):
        load_external_data_for_tensor(t, str(Path(path).parent))
        t.ClearField("data_location")
    return m


def external_tensors(m: onnx.ModelProto) -> list[onnx.TensorProto]:
    from onnx.external_data_helper import _get_all_tensors, uses_external_data
    return [t for t in _get_all_tensors(m) if uses_external_data(t)]


# ---------------------------------------------------------------- checker

def checker_level(path: Path) -> bool | None:
    """True if the file passes the full checker, False if only the plain one, None if neither."""
    try:
        onnx.checker.check_model(str(path), full_check=True)
        return True
    except Exception:
        pass
    try:
        onnx.checker.check_model(str(path), full_check=False)
        return False
    except Exception:
        return None


# ---------------------------------------------------------------- runtime

def ort_session(path: Path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


_NP = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}


# The KV-cache decoder fixtures run only when the mask covers the cache and
# the new tokens: past + seq with both at 2.
_RELATED_SIZES = {"total": 4, "total_sequence_length": 4}


def _symbol_size(d) -> int:
    """2 for a symbol, the sum for a name like `past + seq`, 4 for a KV
    cache's total length."""
    if isinstance(d, str):
        if d in _RELATED_SIZES:
            return _RELATED_SIZES[d]
        parts = [p.strip() for p in d.split("+")]
        if len(parts) > 1 and all(p.isidentifier() for p in parts):
            return 2 * len(parts)
    return 2


def _decoder_mask_covers_cache(session, shapes: dict) -> None:
    """A decoder step whose dims have no telling names (torch.export's s10,
    s43, ...): `attention_mask`'s length is the cache's plus the new tokens'."""
    declared = {i.name: i.shape for i in session.get_inputs()}
    mask = next((n for n in shapes if n.endswith("attention_mask") and len(shapes[n]) == 2), None)
    past = next((n for n in shapes if n.startswith("past") and len(shapes[n]) == 4), None)
    ids = next((n for n in ("input_ids", "inputs_embeds") if n in shapes), None)
    if mask and past and ids and not isinstance(declared[mask][1], int):
        shapes[mask][1] = shapes[past][2] + shapes[ids][1]


def make_inputs(session, seed_key: str) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input; symbolic / unknown dims become 2
    (a KV cache's total length 4, see `_symbol_size`).

    Integers are drawn from {0, 1}: valid token ids, token types, attention
    masks and indices for every fixture here.
    """
    rng = np.random.default_rng(zlib.crc32(seed_key.encode()))
    feeds = {}
    shapes = {
        inp.name: [d if isinstance(d, int) and d >= 0 else _symbol_size(d) for d in inp.shape]
        for inp in session.get_inputs()
    }
    _decoder_mask_covers_cache(session, shapes)
    for inp in session.get_inputs():
        shape = shapes[inp.name]
        dt = _NP.get(inp.type)
        if dt is None:
            raise NotImplementedError(f"input {inp.name}: no generator for {inp.type}")
        if dt == np.bool_:
            feeds[inp.name] = rng.random(shape) < 0.5
        elif np.issubdtype(dt, np.floating):
            feeds[inp.name] = rng.standard_normal(shape).astype(dt)
        else:
            feeds[inp.name] = rng.integers(0, 2, size=shape).astype(dt)
    return feeds


def run(session, feeds) -> dict[str, np.ndarray]:
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def assert_bit_identical(expected: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> None:
    assert list(expected) == list(got), f"output names differ: {list(expected)} vs {list(got)}"
    for name, e in expected.items():
        g = got[name]
        assert e.dtype == g.dtype, f"{name}: dtype {e.dtype} vs {g.dtype}"
        assert e.shape == g.shape, f"{name}: shape {e.shape} vs {g.shape}"
        # compare bit patterns so NaN payloads and -0.0 count too
        if e.dtype.kind in "fc":
            same = np.array_equal(np.ascontiguousarray(e).reshape(-1).view(np.uint8),
                                  np.ascontiguousarray(g).reshape(-1).view(np.uint8))
        else:
            same = np.array_equal(e, g)
        if not same:
            diff = np.abs(e.astype(np.float64) - g.astype(np.float64)) if e.dtype.kind in "fiub" else None
            raise AssertionError(
                f"{name}: outputs are not bit-identical"
                + (f" (max abs diff {np.nanmax(diff):.3g})" if diff is not None and diff.size else ""))
