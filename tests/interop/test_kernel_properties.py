"""Folding kernels against ONNX Runtime on random cases.

For each op infopt's reference kernels implement, a seeded generator draws
shapes, dtypes, attributes in range and values; the op runs alone on
constant inputs through `infopt optimize --no-verify` (so folding computes
it) and in ONNX Runtime (graph optimizations off), and the folded values must
equal ORT's: bit for bit for integers, booleans and data movement, within a
few ulps for float math (f64 computation rounded once against ORT's float32
kernels). Seeds are fixed: a failure names its seed and reproduces.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import conformance as C

CASES_PER_OP = 6
OPSET = 17

F = np.float32
H = np.float16


def _arr(rng, shape, dtype, lo=-4.0, hi=4.0):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -50), min(info.max, 50) + 1, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def _shape(rng, rank=None, lo=1, hi=4):
    rank = rng.integers(1, 4) if rank is None else rank
    return tuple(int(d) for d in rng.integers(lo, hi + 1, size=rank))


def _bcast(rng, shape):
    """A shape that broadcasts to `shape`: some dims 1, maybe fewer axes."""
    drop = rng.integers(0, len(shape))
    s = [d if rng.random() < 0.6 else 1 for d in shape[drop:]]
    return tuple(s)


def binary(op, dtypes, nonzero=False, **attrs):
    def gen(rng):
        dt = dtypes[rng.integers(len(dtypes))]
        s = _shape(rng)
        a, b = _arr(rng, s, dt), _arr(rng, _bcast(rng, s), dt)
        if nonzero:
            b = np.where(b == 0, 3, b).astype(dt)
        return op, [a, b], attrs
    return gen


def unary(op, dtypes, lo=-4.0, hi=4.0, **attrs):
    def gen(rng):
        dt = dtypes[rng.integers(len(dtypes))]
        return op, [_arr(rng, _shape(rng), dt, lo, hi)], attrs
    return gen


def variadic(op, dtypes):
    def gen(rng):
        dt = dtypes[rng.integers(len(dtypes))]
        s = _shape(rng)
        n = int(rng.integers(1, 4))
        return op, [_arr(rng, s, dt)] + [_arr(rng, _bcast(rng, s), dt) for _ in range(n - 1)], {}
    return gen


def reduce(op, dtypes):
    def gen(rng):
        dt = dtypes[rng.integers(len(dtypes))]
        x = _arr(rng, _shape(rng, hi=3), dt, 0.5, 2.0)
        axes = sorted(set(int(a) for a in rng.integers(-x.ndim, x.ndim, size=rng.integers(1, x.ndim + 1))))
        ins = [x] + ([np.array(axes, np.int64)] if op == "ReduceSum" else [])
        attrs = {"keepdims": int(rng.integers(0, 2))}
        if op != "ReduceSum":
            attrs["axes"] = axes  # an attribute until opset 18
        return op, ins, attrs
    return gen


def transpose(rng):
    x = _arr(rng, _shape(rng), F)
    return "Transpose", [x], {"perm": [int(p) for p in rng.permutation(x.ndim)]}


def slice_(rng):
    x = _arr(rng, _shape(rng, hi=5), F)
    ax = int(rng.integers(0, x.ndim))
    d = x.shape[ax]
    step = int(rng.choice([-2, -1, 1, 2]))
    st, en = (int(rng.integers(-d, d)), int(rng.integers(-d - 1, d + 1)))
    return "Slice", [x, np.array([st]), np.array([en]), np.array([ax]), np.array([step])], {}


def gather(rng):
    x = _arr(rng, _shape(rng), F)
    ax = int(rng.integers(-x.ndim, x.ndim))
    d = x.shape[ax]
    idx = rng.integers(-d, d, size=_shape(rng, rank=int(rng.integers(0, 3)))).astype(np.int64)
    return "Gather", [x, idx], {"axis": ax}


def gather_elements(rng):
    x = _arr(rng, _shape(rng), F)
    ax = int(rng.integers(0, x.ndim))
    shape = list(x.shape)
    shape[ax] = int(rng.integers(1, 4))
    idx = rng.integers(-x.shape[ax], x.shape[ax], size=shape).astype(np.int64)
    return "GatherElements", [x, idx], {"axis": ax}


def concat(rng):
    s = list(_shape(rng))
    ax = int(rng.integers(0, len(s)))
    parts = []
    for _ in range(int(rng.integers(1, 4))):
        s[ax] = int(rng.integers(1, 4))
        parts.append(_arr(rng, tuple(s), np.int64))
    return "Concat", parts, {"axis": ax}


def reshape(rng):
    x = _arr(rng, _shape(rng), F)
    target = [int(x.size)] if rng.random() < 0.5 else [-1, 1]
    return "Reshape", [x, np.array(target, np.int64)], {}


def expand(rng):
    s = _shape(rng)
    x = _arr(rng, _bcast(rng, s), F)
    return "Expand", [x, np.array(s, np.int64)], {}


def tile(rng):
    x = _arr(rng, _shape(rng, hi=3), np.int32)
    return "Tile", [x, rng.integers(1, 3, size=x.ndim).astype(np.int64)], {}


def where(rng):
    s = _shape(rng)
    return "Where", [_arr(rng, _bcast(rng, s), np.bool_), _arr(rng, s, F), _arr(rng, _bcast(rng, s), F)], {}


def cast(rng):
    frm, to = [(F, TensorProto.FLOAT16), (F, TensorProto.INT32), (np.int64, TensorProto.FLOAT),
               (H, TensorProto.FLOAT), (np.int32, TensorProto.INT8), (F, TensorProto.DOUBLE)][rng.integers(6)]
    return "Cast", [_arr(rng, _shape(rng), frm, -100.0, 100.0)], {"to": to}


def matmul(rng):
    m, k, n = (int(v) for v in rng.integers(1, 5, size=3))
    batch = _shape(rng, rank=int(rng.integers(0, 2)))
    return "MatMul", [_arr(rng, batch + (m, k), F), _arr(rng, (k, n), F)], {}


def bitshift(rng):
    dt = [np.uint8, np.uint16, np.uint32, np.uint64][rng.integers(4)]
    bits = np.iinfo(dt).bits
    s = _shape(rng)
    x = rng.integers(0, 200, size=s).astype(dt)
    y = rng.integers(0, bits, size=_bcast(rng, s)).astype(dt)
    return "BitShift", [x, y], {"direction": ["LEFT", "RIGHT"][rng.integers(2)]}


def depth_space(op):
    def gen(rng):
        b = int(rng.integers(1, 4))
        if op == "DepthToSpace":
            x = _arr(rng, (1, b * b * int(rng.integers(1, 3)), 2, 3), F)
            return op, [x], {"blocksize": b, "mode": ["DCR", "CRD"][rng.integers(2)]}
        x = _arr(rng, (1, int(rng.integers(1, 3)), 2 * b, b), F)
        return op, [x], {"blocksize": b}
    return gen


def softmax(rng):
    x = _arr(rng, _shape(rng), [F, H][rng.integers(2)])
    return "Softmax", [x], {"axis": int(rng.integers(-x.ndim, x.ndim))}


def recurrent(op):
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]

    def gen(rng):
        seq, batch, isz, h = (int(v) for v in rng.integers(1, 4, size=4))
        direction = ["forward", "reverse", "bidirectional"][rng.integers(3)]
        nd = 2 if direction == "bidirectional" else 1
        ins = [_arr(rng, (seq, batch, isz), F, -1, 1), _arr(rng, (nd, gates * h, isz), F, -1, 1),
               _arr(rng, (nd, gates * h, h), F, -1, 1), _arr(rng, (nd, 2 * gates * h), F, -1, 1)]
        attrs = {"hidden_size": h, "direction": direction}
        if op == "GRU":
            attrs["linear_before_reset"] = int(rng.integers(0, 2))
        return op, ins, attrs
    return gen


GENERATORS = {
    "Add": binary("Add", [F, H, np.int32, np.int64]),
    "Sub": binary("Sub", [F, np.int64]),
    "Mul": binary("Mul", [F, H, np.int32]),
    "Div": binary("Div", [F, np.int32, np.int64], nonzero=True),
    "Mod": binary("Mod", [np.int32, np.int64], nonzero=True),
    "Pow": binary("Pow", [F]),
    "Equal": binary("Equal", [F, np.int64]),
    "Less": binary("Less", [F, np.int32]),
    "Greater": binary("Greater", [F, np.int64]),
    "And": binary("And", [np.bool_]),
    "Or": binary("Or", [np.bool_]),
    "Xor": binary("Xor", [np.bool_]),
    "Not": unary("Not", [np.bool_]),
    "Abs": unary("Abs", [F, H, np.int32]),
    "Neg": unary("Neg", [F, np.int64]),
    "Sqrt": unary("Sqrt", [F, H], 0.0, 9.0),
    "Exp": unary("Exp", [F, H]),
    "Log": unary("Log", [F, H], 0.01, 9.0),
    "Floor": unary("Floor", [F]),
    "Ceil": unary("Ceil", [F]),
    "Round": unary("Round", [F]),
    "Sign": unary("Sign", [F, np.int32]),
    "Reciprocal": unary("Reciprocal", [F], 0.5, 4.0),
    "Relu": unary("Relu", [F, H]),
    "Celu": unary("Celu", [F], alpha=1.5),
    "Max": variadic("Max", [F, np.int32]),
    "Min": variadic("Min", [F, np.int64]),
    "Sum": variadic("Sum", [F]),
    "Mean": variadic("Mean", [F]),
    "ReduceSum": reduce("ReduceSum", [F, np.int64]),
    "ReduceMean": reduce("ReduceMean", [F]),
    "ReduceMax": reduce("ReduceMax", [F, np.int32]),
    "ReduceMin": reduce("ReduceMin", [F]),
    "ReduceProd": reduce("ReduceProd", [F]),
    "Transpose": transpose,
    "Slice": slice_,
    "Gather": gather,
    "GatherElements": gather_elements,
    "Concat": concat,
    "Reshape": reshape,
    "Expand": expand,
    "Tile": tile,
    "Where": where,
    "Cast": cast,
    "MatMul": matmul,
    "BitShift": bitshift,
    "DepthToSpace": depth_space("DepthToSpace"),
    "SpaceToDepth": depth_space("SpaceToDepth"),
    "Softmax": softmax,
    "RNN": recurrent("RNN"),
    "GRU": recurrent("GRU"),
    "LSTM": recurrent("LSTM"),
}


def build(op, inputs, attrs) -> onnx.ModelProto:
    names = [f"in{i}" for i in range(len(inputs))]
    n_out = {"RNN": 2, "GRU": 2, "LSTM": 3}.get(op, 1)
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    g = helper.make_graph([node], "p", [], [helper.make_value_info(o, onnx.TypeProto()) for o in outs],
                          initializer=[numpy_helper.from_array(a, n) for a, n in zip(inputs, names)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    inferred = onnx.shape_inference.infer_shapes(m)
    types = {v.name: v for v in inferred.graph.value_info}
    for o in m.graph.output:
        if o.name in types:
            o.CopyFrom(types[o.name])
    return m


def close(got, want, dtype) -> tuple[bool, str]:
    if np.issubdtype(want.dtype, np.floating):
        # f64 math rounded once against ORT's float32 kernels (its exp,
        # sums, MatMul): a few ulps at the output's scale.
        scale = float(np.max(np.abs(want.astype(np.float64)))) if want.size else 0.0
        eps = float(np.finfo(want.dtype).eps)
        return C.same(got, want, 8 * eps, 8 * eps * max(scale, 1e-30))
    return C.same(got, want, 0.0, 0.0)


def run_one(infopt: str, op: str, seed: int, tmp: Path):
    rng = np.random.default_rng(seed)
    op, inputs, attrs = GENERATORS[op](rng)
    m = build(op, inputs, attrs)
    try:
        want = C.ort_run(m.SerializeToString(), {})
    except Exception as e:  # noqa: BLE001 - ORT not running a drawn case: nothing to compare
        return ("ort-refused", str(e).splitlines()[0][:200])
    src, out = tmp / f"{op}-{seed}.onnx", tmp / f"{op}-{seed}.out.onnx"
    onnx.save(m, str(src))
    p = subprocess.run([infopt, "optimize", str(src), "-o", str(out), "--no-verify"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return ("crash", f"exit {p.returncode}: {p.stderr[-300:]}")
    written = onnx.load(str(out))
    got, how = C.outputs_of(written, {})
    if how != "read":
        return ("declined", how)
    for k, (g, w) in enumerate(zip(got, want)):
        ok, why = close(np.asarray(g), np.asarray(w), w.dtype)
        if not ok:
            return ("wrong", f"output {k}: {why} (attrs {attrs}, input shapes {[a.shape for a in inputs]})")
    return ("folded", "")


@pytest.fixture(scope="session")
def property_results(infopt):
    jobs = [(op, 1000 * i + s) for i, op in enumerate(sorted(GENERATORS)) for s in range(CASES_PER_OP)]
    with tempfile.TemporaryDirectory(prefix="infopt-kernel-props-") as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            futs = {j: pool.submit(run_one, str(infopt), j[0], j[1], Path(tmp)) for j in jobs}
            return {j: f.result() for j, f in futs.items()}


@pytest.mark.parametrize("op", sorted(GENERATORS))
def test_folding_kernel_agrees_with_onnx_runtime(property_results, op):
    mine = {seed: r for (o, seed), r in property_results.items() if o == op}
    bad = {seed: r for seed, r in mine.items() if r[0] in ("wrong", "crash")}
    assert not bad, f"{op}: {bad}"
    folded = [s for s, r in mine.items() if r[0] == "folded"]
    # Every op is one the kernels implement: most drawn cases must fold.
    assert len(folded) >= CASES_PER_OP // 2, f"{op}: only {len(folded)} folded: {mine}"
