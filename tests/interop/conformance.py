"""ONNX's own conformance tests as an oracle for `infopt optimize`.

The cases are the backend node tests the pinned `onnx` wheel generates
(`onnx.backend.test.case.node.collect_testcases`) and the model folders it
ships under `onnx/backend/test/data/{simple,pytorch-converted,
pytorch-operator}`. Each case runs through `infopt optimize` twice:

  default   the model as it is (infopt verifies with its own seeded inputs);
            the written model then runs on the test's inputs;
  folded    every graph input turned into an initializer holding the test's
            values, so that folding must compute every node itself.

A written model must give the test's expected outputs (the tests' own
tolerances: rtol 1e-3, atol 1e-7 unless the case sets others; a float16
output may also be one float16 ulp away). The alternative is a decline: infopt
leaves the node in place (and the written model, run in ONNX Runtime, is
right), or refuses with an exit code that names why (3: a model a runtime
calls invalid, 7: cannot verify). Exit 0 with wrong numbers, exit 4 (a fold
the verifier caught), a crash or a timeout are failures.

Used by tests/interop/test_conformance.py, and standalone for the figures:

    .venv/bin/python tests/interop/conformance.py --infopt target/debug/infopt \
        [--folders node,simple,pytorch-converted,pytorch-operator] [--filter REGEX] [--jobs N]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

FOLDERS = ("node", "simple", "pytorch-converted", "pytorch-operator")
VARIANTS = ("default", "folded")
SKIPS_FILE = Path(__file__).with_name("conformance_skips.txt")
TIMEOUT_S = 120
DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
# infopt's exit codes a case may end with, and what they mean here.
DECLINE_EXITS = {3: "the model is invalid for a runtime", 7: "cannot verify"}


@dataclass
class Case:
    folder: str
    name: str
    model: onnx.ModelProto
    inputs: list  # numpy arrays, in graph-input order (non-initializer inputs)
    outputs: list  # numpy arrays, in graph-output order
    rtol: float = 1e-3
    atol: float = 1e-7
    unscorable: str | None = None  # why the case cannot be scored at all

    @property
    def key(self) -> str:
        return f"{self.folder}/{self.name}"


@dataclass
class Result:
    case: str
    variant: str
    status: str  # folded | declined | refused | wrong | crash | unscored | skipped
    detail: str = ""
    folded_nodes: int = 0
    nodes_before: int = 0
    nodes_after: int = 0
    extra: dict = field(default_factory=dict)


# ------------------------------------------------------------------ cases ---

def _tensor_only(model: onnx.ModelProto) -> str | None:
    for vi in list(model.graph.input) + list(model.graph.output):
        if not vi.type.HasField("tensor_type"):
            kind = vi.type.WhichOneof("value")
            return f"{kind.replace('_type', '')} input or output (infopt takes tensors)"
    return None


def node_cases() -> list[Case]:
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tcs = node.collect_testcases(None)
    cases = []
    for tc in tcs:
        if tc.model is None or not tc.data_sets:
            continue
        ins, outs = tc.data_sets[0]
        why = _tensor_only(tc.model)
        conv = []
        for a in list(ins) + list(outs):
            if isinstance(a, onnx.TensorProto):
                a = numpy_helper.to_array(a)
            elif isinstance(a, np.generic):
                a = np.asarray(a)  # a numpy scalar: a rank-0 tensor
            conv.append(a)
        if why is None and not all(isinstance(a, np.ndarray) for a in conv):
            why = "non-array test data"
        cases.append(Case("node", tc.name, tc.model, conv[: len(ins)], conv[len(ins):],
                          rtol=tc.rtol, atol=tc.atol, unscorable=why))
    return cases


def folder_cases(folder: str) -> list[Case]:
    root = DATA / folder
    cases = []
    for d in sorted(root.iterdir()) if root.is_dir() else []:
        mp, ds = d / "model.onnx", d / "test_data_set_0"
        if not mp.exists() or not ds.is_dir():
            continue
        model = onnx.load(str(mp))

        def read(prefix):
            arrs, k = [], 0
            while (ds / f"{prefix}_{k}.pb").exists():
                t = onnx.TensorProto()
                t.ParseFromString((ds / f"{prefix}_{k}.pb").read_bytes())
                arrs.append(numpy_helper.to_array(t))
                k += 1
            return arrs

        ins, outs = read("input"), read("output")
        why = _tensor_only(model)
        init = {i.name for i in model.graph.initializer}
        real_inputs = [i for i in model.graph.input if i.name not in init]
        if why is None and len(ins) != len(real_inputs):
            why = f"{len(ins)} input files for {len(real_inputs)} inputs"
        cases.append(Case(folder, d.name, model, ins, outs, unscorable=why))
    return cases


def collect(folders) -> list[Case]:
    out = []
    for f in folders:
        out.extend(node_cases() if f == "node" else folder_cases(f))
    return out


def load_skips(path: Path = SKIPS_FILE) -> dict[str, str]:
    """`folder/case  reason` lines; `#` starts a comment line. A reason is required."""
    skips = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, reason = line.partition(" ")
        if not reason.strip():
            raise ValueError(f"{path.name}:{n}: `{key}` has no reason")
        skips[key] = reason.strip()
    return skips


# ------------------------------------------------------------- variants ---

def graph_input_names(model: onnx.ModelProto) -> list[str]:
    init = {i.name for i in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in init]


def folded_model(case: Case) -> onnx.ModelProto:
    """The case's model with every graph input an initializer of its test value."""
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    names = graph_input_names(m)
    values = dict(zip(names, case.inputs))
    keep = [i for i in m.graph.input if i.name not in values]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for name in names:
        # An initializer replaces any earlier one of that name.
        for i, t in enumerate(m.graph.initializer):
            if t.name == name:
                del m.graph.initializer[i]
                break
        m.graph.initializer.append(numpy_helper.from_array(values[name], name))
    if m.ir_version < 4:
        m.ir_version = 4  # initializers that are not inputs need IR 4
    return m


# --------------------------------------------------------------- judging ---

def _ulp(b: np.ndarray, dtype) -> np.ndarray:
    """One unit in the last place of `dtype` at each |b| (float16, bfloat16, float8)."""
    import ml_dtypes

    fi = ml_dtypes.finfo(dtype)
    mag = np.maximum(np.abs(b.astype(np.float64)), float(fi.smallest_normal))
    return float(fi.eps) * np.exp2(np.floor(np.log2(mag)))


def same(got, want, rtol: float, atol: float) -> tuple[bool, str]:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False, f"shape {got.shape} where {want.shape} is expected"
    if got.dtype != want.dtype:
        return False, f"dtype {got.dtype} where {want.dtype} is expected"
    if got.size == 0:
        return True, ""
    half = got.dtype == np.float16 or (got.dtype.kind == "V" and "float" in got.dtype.name)
    narrow = got.dtype
    if got.dtype.kind == "V":
        # ml_dtypes' types (bfloat16, float8, int4, ...): compared through
        # float32, which holds all their values exactly (NaN equals NaN).
        got, want = got.astype(np.float32), want.astype(np.float32)
    if got.dtype.kind in "fc":
        x = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
        y = want.astype(x.dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(x - y)
            tol = atol + rtol * np.abs(y)
            if half:
                tol = np.maximum(tol, _ulp(want, narrow))
            ok = (d <= tol) | (x == y) | (np.isnan(x) & np.isnan(y))
        if ok.all():
            return True, ""
        bad = int((~ok).sum())
        finite = np.where(np.isfinite(d), d, 0)
        i = int(np.argmax(np.where(ok, -1, finite)))
        return False, (f"{bad} of {got.size} elements off, max abs {np.max(finite):.3g} "
                       f"(element {i}: {x.flat[i]} where {y.flat[i]} is expected)")
    if got.dtype.kind in "OSU":
        return bool((got == want).all()), "strings differ"
    eq = got == want
    if eq.all():
        return True, ""
    i = int(np.argmin(eq.reshape(-1)))
    return False, (f"{int((~eq).sum())} of {got.size} elements off "
                   f"(element {i}: {got.flat[i]} where {want.flat[i]} is expected)")


def compare(got: list, want: list, case: Case) -> tuple[bool, str]:
    if len(got) != len(want):
        return False, f"{len(got)} outputs where {len(want)} are expected"
    for k, (g, w) in enumerate(zip(got, want)):
        ok, why = same(g, w, case.rtol, case.atol)
        if not ok:
            return False, f"output {k}: {why}"
    return True, ""


def ort_run(model_bytes: bytes, feeds: dict) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in s.get_inputs()}
    return s.run(None, {k: v for k, v in feeds.items() if k in wanted})


def reference_run(model: onnx.ModelProto, feeds: dict) -> list:
    from onnx.reference import ReferenceEvaluator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = ReferenceEvaluator(model)
        return ev.run(None, {k: v for k, v in feeds.items() if k in ev.input_names})


def outputs_of(model: onnx.ModelProto, feeds: dict) -> tuple[list | None, str]:
    """Graph outputs that are initializers are read; otherwise the model runs
    in ONNX Runtime, or in onnx's reference evaluator where ORT cannot."""
    inits = {t.name: t for t in model.graph.initializer}
    consts = {}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = a.t
    names = [o.name for o in model.graph.output]
    if all(n in inits or n in consts for n in names):
        return [numpy_helper.to_array(inits.get(n) or consts[n]) for n in names], "read"
    errors = []
    try:
        return ort_run(model.SerializeToString(), feeds), "ort"
    except Exception as e:  # noqa: BLE001 - any runtime failure: try the other
        errors.append(f"ORT: {str(e).splitlines()[0][:200]}")
    try:
        return reference_run(model, feeds), "reference"
    except Exception as e:  # noqa: BLE001
        errors.append(f"onnx reference: {str(e).splitlines()[0][:200] if str(e) else type(e).__name__}")
    return None, "; ".join(errors)


def compute_nodes(model: onnx.ModelProto) -> int:
    return sum(1 for n in model.graph.node if n.op_type not in ("Constant", "ConstantOfShape"))


def run_case(infopt: str, case: Case, variant: str, workdir: Path) -> Result:
    res = Result(case.key, variant, "unscored")
    if case.unscorable:
        res.detail = case.unscorable
        return res
    model = case.model if variant == "default" else folded_model(case)
    res.nodes_before = compute_nodes(model)
    d = workdir / f"{case.folder}__{case.name}__{variant}"
    d.mkdir(parents=True, exist_ok=True)
    src, out = d / "model.onnx", d / "out.onnx"
    src.write_bytes(model.SerializeToString())
    feeds = dict(zip(graph_input_names(case.model), case.inputs)) if variant == "default" else {}
    try:
        p = subprocess.run([infopt, "optimize", str(src), "-o", str(out)],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        res.status, res.detail = "crash", f"timeout after {TIMEOUT_S} s"
        return res
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    res.extra["notes"] = [ln for ln in lines if ln.lstrip().startswith("note:")][:5]
    if p.returncode != 0:
        why = lines[-1] if lines else ""
        if p.returncode in DECLINE_EXITS and why:
            res.status, res.detail = "refused", f"exit {p.returncode}: {why[:300]}"
            res.extra["accepted"] = True
        elif p.returncode == 4:
            res.status, res.detail = "wrong", f"exit 4 (verification failed): {why[:300]}"
        else:
            res.status, res.detail = "crash", f"exit {p.returncode}: {why[:300]}"
        return res
    said = lines + p.stdout.splitlines()
    if any("panick" in ln for ln in said):
        res.extra["panic_note"] = next(ln for ln in said if "panick" in ln)[:300]
    written = onnx.load(str(out))
    res.nodes_after = compute_nodes(written)
    got, how = outputs_of(written, feeds)
    if got is None:
        res.status, res.detail = "unscored", f"the written model runs nowhere: {how}"
        return res
    ok, why = compare(got, case.outputs, case)
    if ok:
        res.status = "folded" if res.nodes_after == 0 and variant == "folded" else "declined"
        if variant == "default":
            res.status = "folded" if res.nodes_after < res.nodes_before else "declined"
        res.detail = how
        return res
    # The written model is off. When the runtime that judged it is just as
    # far off on the original, the runtime (not infopt) disagrees with ONNX.
    base, base_how = outputs_of(model, feeds)
    if base is not None and base_how == how:
        b_ok, _ = compare(base, case.outputs, case)
        if not b_ok:
            same_as_base = all(same(g, b, 0.0, 0.0)[0] or same(g, b, case.rtol, case.atol)[0]
                               for g, b in zip(got, base))
            if same_as_base:
                res.status, res.detail = "unscored", f"{how} disagrees with the expected outputs on the original too"
                return res
    res.status, res.detail = "wrong", f"written with exit 0, run in {how}: {why}"
    return res


def run_all(infopt: str, cases: list[Case], variants=VARIANTS, jobs: int | None = None,
            skips: dict[str, str] | None = None, check_skips: bool = True) -> list[Result]:
    skips = skips or {}
    jobs = jobs or os.cpu_count() or 2
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="infopt-conformance-") as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            futs = {}
            for c in cases:
                for v in variants:
                    key = f"{c.key}#{v}"
                    listed = skips.get(key) or skips.get(c.key)
                    if listed and not check_skips:
                        results.append(Result(c.key, v, "skipped", listed))
                        continue
                    futs[pool.submit(run_case, infopt, c, v, Path(tmp))] = listed
            for f, listed in futs.items():
                r = f.result()
                if listed:
                    r.extra["listed_skip"] = listed
                results.append(r)
    return results


# Filled by the pytest session, printed by conftest.py at the end.
SUMMARY: dict = {}


def passing(r: Result) -> bool:
    """Folded or declined with the expected outputs, or refused with a reason."""
    return r.status in ("folded", "declined") or (r.status == "refused" and bool(r.extra.get("accepted")))


def summarize(results: list[Result]) -> dict:
    """Per `folder (variant)`: folded, declined (written, right, nodes left),
    refused (exit 3/7 with a reason), skipped (listed), and what must be 0:
    wrong, crash, unscored (not listed), listed-but-passing."""
    table: dict = {}
    for r in results:
        folder = r.case.split("/", 1)[0]
        listed = "listed_skip" in r.extra or r.status == "skipped"
        if listed:
            key = "listed-but-passing" if passing(r) else "skipped"
        else:
            key = r.status
        row = table.setdefault(f"{folder} ({r.variant})", {})
        row[key] = row.get(key, 0) + 1
    return table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--infopt", default=os.environ.get("INFOPT_BIN", "target/debug/infopt"))
    ap.add_argument("--folders", default=",".join(FOLDERS))
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--filter", default=None)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cases = collect(args.folders.split(","))
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c.key)]
    results = run_all(args.infopt, cases, args.variants.split(","), args.jobs,
                      load_skips() if SKIPS_FILE.exists() else {})
    for r in sorted(results, key=lambda r: (r.case, r.variant)):
        if not passing(r) or "listed_skip" in r.extra:
            print(f"{r.status:9} {r.variant:8} {r.case}: {r.detail}"
                  + (f"  [listed skip: {r.extra['listed_skip']}]" if "listed_skip" in r.extra else ""))
    for k, v in sorted(summarize(results).items()):
        print(k, json.dumps(v, sort_keys=True))
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in results], indent=1, default=str))
    # As the pytest judges: every run passes or is listed, and no listed one passes.
    return 0 if all(passing(r) != ("listed_skip" in r.extra) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
