"""Run infopt, onnxsim and onnxslim over the model zoo and check infopt's outputs.

Not a test: prints one table (and writes ZOO/check/results.json). Needs onnx,
onnxruntime, onnxsim and onnxslim in the Python that runs it, e.g.

    /tmp/exportenv/bin/python bench/export_zoo.py /tmp/zoo
    /tmp/peers/bin/python bench/zoo_check.py /tmp/zoo [--infopt target/release/infopt] [--only SUBSTR,..]

For every ZOO/*.onnx:
  * `infopt optimize MODEL -o OUT --json` (default pipeline, verification on):
    exit code, last stderr line, node count before/after, wall time;
  * original and infopt's output run in ONNX Runtime (CPU, 1 thread, default
    graph optimizations, and again with them disabled) on seeded inputs, at the
    shapes below and at ALT_SYMBOLS; pass when np.allclose(out, ref, rtol=1e-4,
    atol=1e-5) for every output (float16 outputs: rtol=2e-3, atol=1e-3), and
    every concrete output dim infopt declares matches the real shape;
  * the input/output signature (names, dtypes, dims, opsets) is unchanged;
  * onnx.checker.check_model(OUT, full_check=True);
  * `python -m onnxsim IN OUT` and `python -m onnxslim IN OUT`: node count,
    wall time, and their own agreement with the original.
Then the static-shape case for three transformer models: infopt --input-shape
next to onnxsim --overwrite-input-shape and onnxslim --input-shapes.

Inputs: symbolic dims take 2 (batch), 8 (seq) or the per-model image size
below (a size the model accepts that differs from the export size where the
model allows it); fixed dims are kept. Integer ranges and export shapes come
from ZOO/zoo_meta.json written by export_zoo.py.
"""
import argparse
import fnmatch
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

RTOL, ATOL = 1e-4, 1e-5
# float16 outputs: fp32 tolerances are below one fp16 ulp (2^-10 relative), so any reassociation fails
# them; use about two ulps instead (reported separately in the verdict).
RTOL16, ATOL16 = 2e-3, 1e-3
HERE = os.path.dirname(os.path.abspath(__file__))

# Concrete values of symbolic dims, per model pattern (first match wins, then defaults).
SYMBOLS = [
    ("yolo_head_hw*", {"height": 192, "width": 320}),
    ("mobilenet_v3_small_hw*", {"height": 160, "width": 192}),
    ("crnn*", {"width": 100}),
    ("ssdlite*", {"height": 300, "width": 400}),
    ("fasterrcnn*", {"height": 240, "width": 320}),
]
DEFAULT_SYMBOLS = {"batch": 2, "seq": 8}
# Further symbol values every dynamic model is also run with (original vs infopt's output):
# batch 1 / seq 1 and odd sizes catch rewrites that baked in a dim or mis-broadcast.
ALT_SYMBOLS = [
    {"batch": 1, "seq": 1, "height": 224, "width": 64},
    {"batch": 3, "seq": 13, "height": 256, "width": 160},
]
ALT_IMAGE_OK = ("yolo_head_hw*", "mobilenet_v3_small_hw*", "crnn*", "ssdlite*", "fasterrcnn*")

# The static-shape case: model -> {input: shape}
STATIC = {
    "bert_seqcls_op16": {"input_ids": [1, 32], "attention_mask": [1, 32], "token_type_ids": [1, 32]},
    "gpt2_model_op14": {"input_ids": [1, 32], "attention_mask": [1, 32]},
    "distilbert_op13": {"input_ids": [1, 32], "attention_mask": [1, 32]},
}


def default_infopt():
    for p in ("target/release/infopt", "target/debug/infopt"):
        p = os.path.join(HERE, "..", p)
        if os.path.exists(p):
            return os.path.normpath(p)
    return "infopt"


def count_nodes(g):
    """(top-level nodes, nodes including every subgraph)."""
    total = 0
    for n in g.node:
        total += 1
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                total += count_nodes(a.g)[1]
            elif a.type == onnx.AttributeProto.GRAPHS:
                total += sum(count_nodes(s)[1] for s in a.graphs)
    return len(g.node), total


def nodes_of(path):
    try:
        return count_nodes(onnx.load(path, load_external_data=False).graph)
    except Exception:  # noqa: BLE001
        return (None, None)


def run(cmd, timeout):
    t = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        return p.returncode, time.time() - t, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return "timeout", time.time() - t, e.stdout or "", (e.stderr or "") if isinstance(e.stderr, str) else ""


def last_line(s):
    lines = [x for x in (s or "").strip().splitlines() if x.strip()]
    return lines[-1].strip() if lines else ""


def input_shapes(model_path, meta, name, fixed=None, alt=None):
    """Concrete shape for every graph input (alt: one of ALT_SYMBOLS instead of the defaults)."""
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    syms = dict(DEFAULT_SYMBOLS)
    for pat, vals in SYMBOLS:
        if fnmatch.fnmatch(name, pat):
            syms.update(vals)
            break
    if alt:
        syms.update({k: v for k, v in alt.items() if k in DEFAULT_SYMBOLS
                     or any(fnmatch.fnmatch(name, p) for p in ALT_IMAGE_OK)})
    out = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        if fixed and i.name in fixed:
            out[i.name] = list(fixed[i.name])
            continue
        exp = meta.get("inputs", {}).get(i.name, {}).get("shape")
        shape = []
        for k, d in enumerate(i.type.tensor_type.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                shape.append(d.dim_value)
            elif d.dim_param in syms:
                shape.append(syms[d.dim_param])
            elif exp is not None:
                shape.append(exp[k])
            else:
                shape.append(2)
        out[i.name] = shape
    return out


def make_feeds(sess, shapes, meta):
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = shapes[i.name]
        info = meta.get("inputs", {}).get(i.name, {})
        if i.type == "tensor(float16)":
            feeds[i.name] = rng.random(shape, dtype=np.float32).astype(np.float16)
        elif i.type == "tensor(double)":
            feeds[i.name] = rng.random(shape)
        elif "float" in i.type:
            feeds[i.name] = rng.random(shape, dtype=np.float32)
        elif "bool" in i.type:
            feeds[i.name] = np.ones(shape, dtype=bool)
        else:
            dt = np.int64 if "int64" in i.type else np.int32
            if "mask" in i.name:
                a = np.ones(shape, dtype=dt)
                if len(shape) == 2 and shape[0] > 1 and shape[1] > 3:
                    a[1, -3:] = 0  # right padding on the second sequence
                feeds[i.name] = a
            else:
                lo, hi = info.get("range", [0, 2])
                feeds[i.name] = rng.integers(lo, hi, size=shape).astype(dt)
    return feeds


def session(path, level):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    so.graph_optimization_level = level
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def compare(ref_path, test_path, shapes, meta, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL, cache=None):
    """-> dict(ok, max_abs, max_rel, err). cache keeps the reference outputs per level."""
    key = (ref_path, level, json.dumps(shapes, sort_keys=True))
    try:
        if cache is not None and key in cache:
            feeds, ra, names = cache[key]
        else:
            a = session(ref_path, level)
            feeds = make_feeds(a, shapes, meta)
            ra = a.run(None, feeds)
            names = [o.name for o in a.get_outputs()]
            if cache is not None:
                cache[key] = (feeds, ra, names)
    except Exception as e:  # noqa: BLE001
        return dict(ok=False, max_abs=None, max_rel=None, err=f"original failed in ORT: {str(e).splitlines()[0]}")
    try:
        b = session(test_path, level)
        rb = b.run(None, feeds)
        declared = {o.name: o.shape for o in b.get_outputs()}
    except Exception as e:  # noqa: BLE001
        return dict(ok=False, max_abs=None, max_rel=None, err=f"ORT cannot run output: {str(e).splitlines()[0][:300]}")
    ok, mabs, mrel, err = True, 0.0, 0.0, None
    if len(ra) != len(rb):
        return dict(ok=False, max_abs=None, max_rel=None, err=f"{len(ra)} outputs vs {len(rb)}")
    for n, x, y in zip(names, ra, rb):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return dict(ok=False, max_abs=None, max_rel=None,
                        err=f"output {n}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
        dec = declared.get(n)
        if dec is not None and (len(dec) != y.ndim or any(isinstance(d, int) and d != e for d, e in zip(dec, y.shape))):
            ok, err = False, f"output {n}: declared shape {dec}, actual {list(y.shape)}"
        if x.size == 0:
            continue
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        if not np.array_equal(np.isnan(xf), np.isnan(yf)):
            ok, err = False, f"output {n}: NaN pattern differs"
        fin = np.isfinite(xf) & np.isfinite(yf)
        d = np.abs(xf - yf)[fin]
        if d.size:
            mabs = max(mabs, float(d.max()))
            mrel = max(mrel, float((d / np.maximum(np.abs(xf[fin]), 1e-12)).max()))
        fp16 = x.dtype == np.float16
        rtol, atol = (RTOL16, ATOL16) if fp16 else (RTOL, ATOL)
        if not np.allclose(yf, xf, rtol=rtol, atol=atol, equal_nan=True):
            ok = False
            err = err or f"output {n} differs" + (" (beyond fp16 tolerance)" if fp16 else "")
    return dict(ok=ok, max_abs=mabs, max_rel=mrel, err=err)


def signature(path):
    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}

    def sig(vs):
        out = []
        for v in vs:
            if v.name in inits:
                continue
            t = v.type.tensor_type
            dims = [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in t.shape.dim] \
                if t.HasField("shape") else None
            out.append((v.name, t.elem_type, dims))
        return out
    return dict(inputs=sig(m.graph.input), outputs=sig(m.graph.output), ir=m.ir_version,
                opsets=sorted((o.domain, o.version) for o in m.opset_import))


def signature_diff(src, out, fixed):
    """What changed in the interface (names, dtypes, dims, opsets); fixed inputs may lose their symbols."""
    a, b = signature(src), signature(out)
    diffs = []
    for k in ("inputs", "outputs"):
        if [x[:2] for x in a[k]] != [x[:2] for x in b[k]]:
            diffs.append(f"{k} names/types {[x[:2] for x in a[k]]} -> {[x[:2] for x in b[k]]}")
            continue
        for (n, _, da), (_, _, db) in zip(a[k], b[k]):
            if da == db or (fixed and k == "inputs" and n in fixed):
                continue
            if k == "outputs" and da is not None and db is not None and len(da) == len(db) and all(
                    x == y or isinstance(x, str) for x, y in zip(da, db)):
                continue  # symbolic output dims refined (checked against the real shapes in compare())
            diffs.append(f"{k[:-1]} {n} dims {da} -> {db}")
    if a["opsets"] != b["opsets"]:
        diffs.append(f"opsets {a['opsets']} -> {b['opsets']}")
    if a["ir"] != b["ir"]:
        diffs.append(f"ir_version {a['ir']} -> {b['ir']}")
    return diffs


def checker(path):
    try:
        onnx.checker.check_model(path, full_check=True)
        return "ok"
    except Exception as e:  # noqa: BLE001
        return f"FAIL: {str(e).strip().splitlines()[0][:300]}"


def peer(tool, src, dst, shape_args, timeout):
    cmd = [sys.executable, "-m", tool, src, dst, *shape_args]
    rc, secs, _, err = run(cmd, timeout)
    ok = rc == 0 and os.path.exists(dst)
    return dict(cmd=" ".join(cmd), rc=rc, secs=secs, nodes=nodes_of(dst) if ok else (None, None),
                err=None if ok else last_line(err))


def fmt(x, spec="{:.1e}"):
    return "-" if x is None else spec.format(x)


def check_model(name, src, meta, out_dir, infopt, timeout, peers, fixed=None, tag=""):
    r = dict(model=name + tag, src=src)
    shapes = input_shapes(src, meta, name, fixed)
    r["shapes"] = shapes
    r["nodes_before"] = nodes_of(src)
    out = os.path.join(out_dir, f"{name}{tag}.infopt.onnx")
    if os.path.exists(out):
        os.remove(out)
    shape_args = []
    for k, v in (fixed or {}).items():
        shape_args += ["--input-shape", f"{k}:{'x'.join(map(str, v))}"]
    cmd = [infopt, "optimize", src, "-o", out, "--json", *shape_args]
    r["cmd"] = " ".join(cmd)
    rc, secs, stdout, stderr = run(cmd, timeout)
    r.update(rc=rc, secs=secs, stderr_last=last_line(stderr))
    try:
        rep = json.loads(stdout)
        r["verification"] = rep.get("verification")
        r["declined"] = len(rep.get("declined") or [])
        r["warnings"] = rep.get("warnings")
    except Exception:  # noqa: BLE001
        pass
    cache = {}
    if rc == 0 and os.path.exists(out):
        r["nodes_after"] = nodes_of(out)
        r["ort"] = compare(src, out, shapes, meta, cache=cache)
        r["ort_noopt"] = compare(src, out, shapes, meta, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
        r["checker"] = checker(out)
        r["signature"] = signature_diff(src, out, fixed)
        r["alt"] = []
        if not fixed:
            seen = {json.dumps(shapes, sort_keys=True)}
            for alt in ALT_SYMBOLS:
                sh = input_shapes(src, meta, name, alt=alt)
                if json.dumps(sh, sort_keys=True) in seen:
                    continue
                seen.add(json.dumps(sh, sort_keys=True))
                c = compare(src, out, sh, meta)
                c["shapes"] = sh
                r["alt"].append(c)
    else:
        r["nodes_after"] = (None, None)
        r["ort"] = r["ort_noopt"] = None
        r["checker"] = None
    if peers:
        for tool in ("onnxsim", "onnxslim"):
            dst = os.path.join(out_dir, f"{name}{tag}.{tool}.onnx")
            if os.path.exists(dst):
                os.remove(dst)
            if fixed and tool == "onnxsim":
                sa = ["--overwrite-input-shape"] + [f"{k}:{','.join(map(str, v))}" for k, v in fixed.items()]
            elif fixed:
                sa = ["--input-shapes"] + [f"{k}:{','.join(map(str, v))}" for k, v in fixed.items()]
            else:
                sa = []
            p = peer(tool, src, dst, sa, timeout)
            if p["rc"] == 0 and os.path.exists(dst):
                p["ort"] = compare(src, dst, shapes, meta, cache=cache)
            r[tool] = p
    return r


def verdict(r):
    bad = []
    if r["rc"] != 0:
        bad.append(f"exit {r['rc']}")
    if r.get("ort") and not r["ort"]["ok"]:
        bad.append("ORT " + (r["ort"]["err"] or "mismatch"))
    if r.get("ort_noopt") and not r["ort_noopt"]["ok"] and (not r.get("ort") or r["ort"]["ok"]):
        bad.append("ORT(noopt) " + (r["ort_noopt"]["err"] or "mismatch"))
    if r.get("checker") and r["checker"] != "ok":
        bad.append("checker")
    for c in r.get("alt") or []:
        if not c["ok"]:
            bad.append(f"ORT@{c['shapes']} " + (c["err"] or "mismatch"))
    if r.get("signature"):
        bad.append("interface changed")
    after, after_total = r["nodes_after"]
    for tool in ("onnxsim", "onnxslim"):
        p = r.get(tool)
        if after is not None and p and p["nodes"][0] is not None and after > p["nodes"][0]:
            note = "" if after_total > p["nodes"][1] else " (top level only; fewer in all)"
            bad.append(f">{tool} by {after - p['nodes'][0]}{note}")
    return "ok" if not bad else "; ".join(bad)


def peer_cell(p):
    """Node count of a peer's output, '!' when its output disagrees with the original in ORT."""
    if not p:
        return "-"
    if p.get("rc") != 0:
        return "ERR"
    n = p.get("nodes") or (None, None)
    cell = "-" if n[0] is None else (f"{n[0]}" if n[0] == n[1] else f"{n[0]}({n[1]})")
    if p.get("ort") and not p["ort"]["ok"]:
        cell += "!"
    return cell


def print_table(rows, title):
    print(f"\n## {title}\n")
    hdr = (f"{'model':<38} {'rc':>3} {'before':>11} {'infopt':>11} {'sim':>11} {'slim':>11} "
           f"{'t_inf':>6} {'t_sim':>6} {'t_slim':>6} {'maxabs':>8} {'maxrel':>8} {'chk':>4}  verdict")
    print(hdr)
    print("-" * len(hdr))

    def nn(t):
        if t is None or t[0] is None:
            return "-"
        return f"{t[0]}" if t[0] == t[1] else f"{t[0]}({t[1]})"
    for r in rows:
        o = r.get("ort") or {}
        s, l = r.get("onnxsim") or {}, r.get("onnxslim") or {}
        print(f"{r['model']:<38} {r['rc']:>3} {nn(r['nodes_before']):>11} {nn(r['nodes_after']):>11} "
              f"{peer_cell(s):>11} {peer_cell(l):>11} "
              f"{r['secs']:>6.2f} {fmt(s.get('secs'), '{:.2f}'):>6} {fmt(l.get('secs'), '{:.2f}'):>6} "
              f"{fmt(o.get('max_abs')):>8} {fmt(o.get('max_rel')):>8} "
              f"{'ok' if r.get('checker') == 'ok' else ('-' if r.get('checker') is None else 'FAIL'):>4}  "
              f"{verdict(r)}")
    print("\nnodes: top-level (with subgraph nodes in parentheses when there are any; '!' = that tool's output "
          "disagrees with the original in ORT); times in seconds (wall, one process each); maxabs/maxrel: "
          "infopt output vs original in ORT (CPU, 1 thread, default graph optimizations) at the first shape set; "
          "verdict also covers the extra shape sets, ORT with optimizations disabled, the checker and the "
          "input/output signature.")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("zoo", nargs="?", default="/tmp/zoo")
    ap.add_argument("--infopt", default=default_infopt())
    ap.add_argument("--only", default=None, help="comma-separated substrings of model names")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-static", action="store_true")
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args()
    meta_all = {}
    mp = os.path.join(a.zoo, "zoo_meta.json")
    if os.path.exists(mp):
        meta_all = json.load(open(mp))
    out_dir = os.path.join(a.zoo, "check")
    os.makedirs(out_dir, exist_ok=True)
    models = sorted(glob.glob(os.path.join(a.zoo, "*.onnx")))
    only = a.only.split(",") if a.only else None
    rows, static_rows = [], []
    for src in models:
        name = os.path.basename(src)[:-5]
        if only and not any(o in name for o in only):
            continue
        r = check_model(name, src, meta_all.get(name, {}), out_dir, a.infopt, a.timeout, not a.no_peers)
        rows.append(r)
        print(f"  {name}: rc={r['rc']} {r['nodes_before']} -> {r['nodes_after']} {verdict(r)}",
              file=sys.stderr, flush=True)
    if not a.no_static:
        for name, fixed in STATIC.items():
            src = os.path.join(a.zoo, name + ".onnx")
            if not os.path.exists(src) or (only and not any(o in name for o in only)):
                continue
            r = check_model(name, src, meta_all.get(name, {}), out_dir, a.infopt, a.timeout, not a.no_peers,
                            fixed=fixed, tag="@static")
            static_rows.append(r)
            print(f"  {name}@static: rc={r['rc']} {r['nodes_before']} -> {r['nodes_after']} {verdict(r)}",
                  file=sys.stderr, flush=True)
    try:
        import hashlib
        with open(a.infopt, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()[:12]
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(os.path.getmtime(a.infopt)))
        ver = subprocess.run([a.infopt, "--version"], capture_output=True, text=True).stdout.strip()
        print(f"{ver}; binary sha256 {digest}…, built {stamp} UTC")
    except OSError:
        pass
    print(f"infopt: {a.infopt}; tolerance rtol={RTOL} atol={ATOL} (float16 outputs: rtol={RTOL16} atol={ATOL16}); onnxruntime {ort.__version__}, onnx {onnx.__version__}")
    print_table(rows, "dynamic shapes (default pipeline)")
    if static_rows:
        print_table(static_rows, "static shapes (--input-shape / --overwrite-input-shape / --input-shapes)")
    failures = [r for r in rows + static_rows if verdict(r) != "ok"]
    if failures:
        print("\n## details\n")
    for r in failures:
        print(f"- {r['model']}: {verdict(r)}")
        print(f"    cmd: {r['cmd']}")
        if r["rc"] != 0:
            print(f"    stderr: {r['stderr_last']}")
        for k in ("ort", "ort_noopt"):
            if r.get(k) and not r[k]["ok"]:
                print(f"    {k}: {r[k]}")
        if r.get("checker") not in (None, "ok"):
            print(f"    checker: {r['checker']}")
        for c in r.get("alt") or []:
            if not c["ok"]:
                print(f"    ORT at {c['shapes']}: {c}")
        for d in r.get("signature") or []:
            print(f"    interface: {d}")
        for tool in ("onnxsim", "onnxslim"):
            p = r.get(tool)
            if p and p.get("rc") != 0:
                print(f"    {tool} failed: {p.get('err')}")
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(rows + static_rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
