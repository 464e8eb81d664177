"""Calibration time and peak memory: `infopt calibrate` against ONNX Runtime's
calibrators (`onnxruntime.quantization.calibrate`), same model, same samples,
same machine, interleaved run by run.

    python bench/calib_bench.py INFOPT_BIN MODEL.onnx [--samples 64,256,1024]
        [--ort-samples 64] [--methods entropy,minmax] [--runs 3]
        [--backend ort] [--shape 1,3,224,224 | --rec] [--ort-limit 12G]
        [--baseline EARLIER_INFOPT_BIN] [--baseline-samples 64]
        [--stacked 256] [--work DIR]

Samples are one .npy file per sample in a folder (so neither side holds the
whole set), seeded standard-normal arrays of `--shape`, or with `--rec`
text lines rendered as bench/real_int8.py renders them for PP-OCRv4 rec
(3x48x320). Each row is one process, timed from outside (wall, peak RSS by
/usr/bin/time); for ORT the time inside the process from
`create_calibrator` to `compute_data` is printed too (it leaves out
Python's start and imports, which favours ORT). ORT's HistogramCalibrater
(entropy, percentile) keeps every intermediate of every sample in memory:
`--ort-limit` runs it inside a memory cgroup of that size
(bench/under_limit.sh, root needed) so that a size it cannot survive ends
in an OOM kill of that process, not of the machine; the row then says so.
`--stacked N,...` also calibrates infopt on the first N samples written as
one stacked, uncompressed `.npz` (the layout infopt streams sample by
sample), so its memory can be set beside the folder's. `--baseline-samples`
limits the baseline binary to those counts (default: every count).
Prints a Markdown table.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

ORT_CHILD = r'''
import os, sys, time, numpy as np
from onnxruntime.quantization import calibrate as C
model, folder, count, method, out = sys.argv[1:6]
files = sorted(os.listdir(folder))[: int(count)]
import onnx
name = onnx.load(model, load_external_data=False).graph.input[0].name
class Reader(C.CalibrationDataReader):
    def __init__(self):
        self.i = 0
    def get_next(self):
        if self.i >= len(files):
            return None
        self.i += 1
        return {name: np.load(os.path.join(folder, files[self.i - 1]))}
m = {"minmax": C.CalibrationMethod.MinMax, "entropy": C.CalibrationMethod.Entropy,
     "percentile": C.CalibrationMethod.Percentile}[method]
t = time.perf_counter()
cal = C.create_calibrator(model, [], augmented_model_path=out, calibrate_method=m)
cal.collect_data(Reader())
cal.compute_data()
print("inside", time.perf_counter() - t)
'''


def timed(cmd, limit=None):
    """(exit code, wall seconds, peak RSS MB, output) of one process."""
    if limit:
        cmd = ["bash", os.path.join(HERE, "under_limit.sh"), limit] + cmd
    else:
        cmd = ["/usr/bin/time", "-f", "peak RSS %M KB"] + cmd
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    out = p.stdout + p.stderr
    rss = re.findall(r"peak RSS (\d+) KB", out)
    return p.returncode, wall, (int(rss[-1]) / 1024 if rss else float("nan")), out


def make_samples(folder, n, shape, rec):
    os.makedirs(folder, exist_ok=True)
    if rec:
        sys.path.insert(0, HERE)
        import real_int8

        dictionary = real_int8.rec_dictionary(real_int8.REC)
        arrays = (x for x, _ in real_int8.rec_samples(n, 1, dictionary))
    else:
        rng = np.random.default_rng(0)
        arrays = (rng.standard_normal(shape).astype(np.float32) for _ in range(n))
    for i, a in enumerate(arrays):
        np.save(os.path.join(folder, f"s{i:05d}.npy"), a)


def stacked_npz(path, all_dir, n):
    """The first n samples as one uncompressed .npz, array `input`, written a
    sample at a time (zip entry of one .npy, leading axis n)."""
    import zipfile

    files = sorted(os.listdir(all_dir))[:n]
    first = np.load(os.path.join(all_dir, files[0]))
    item = first[0] if first.shape[0] == 1 else first
    shape = (n,) + item.shape
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (
        np.lib.format.dtype_to_descr(item.dtype), repr(shape))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        with z.open("input.npy", "w", force_zip64=True) as out:
            out.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
            for f in files:
                a = np.load(os.path.join(all_dir, f))
                out.write(np.ascontiguousarray(a.reshape(item.shape)).tobytes())


def subset(folder, all_dir, n):
    """A folder holding the first n samples (hard links)."""
    os.makedirs(folder, exist_ok=True)
    for f in sorted(os.listdir(all_dir))[:n]:
        os.link(os.path.join(all_dir, f), os.path.join(folder, f))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("infopt")
    ap.add_argument("model")
    ap.add_argument("--samples", default="64")
    ap.add_argument("--ort-samples", default="64")
    ap.add_argument("--methods", default="entropy,minmax")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backend", default="ort")
    ap.add_argument("--shape", default="1,3,224,224")
    ap.add_argument("--rec", action="store_true", help="rendered text lines for PP-OCRv4 rec")
    ap.add_argument("--ort-limit", default=None, help="memory cgroup limit for ORT, e.g. 12G")
    ap.add_argument("--work", default=None)
    ap.add_argument("--baseline", default=None, help="an earlier infopt binary, timed in the same runs")
    ap.add_argument("--baseline-samples", default=None, help="counts the baseline runs at (default: all)")
    ap.add_argument("--stacked", default="", help="counts also calibrated from one stacked .npz (infopt only)")
    a = ap.parse_args()
    sizes = [int(s) for s in a.samples.split(",")]
    ort_sizes = [int(s) for s in a.ort_samples.split(",") if s]
    shape = [int(x) for x in a.shape.split(",")]
    work = a.work or tempfile.mkdtemp(prefix="calib-bench-")
    all_dir = os.path.join(work, "all")
    if not os.path.isdir(all_dir):
        make_samples(all_dir, max(sizes + ort_sizes), shape, a.rec)
    stacked_sizes = [int(x) for x in a.stacked.split(",") if x]
    base_sizes = [int(x) for x in a.baseline_samples.split(",")] if a.baseline_samples else sizes
    for n in stacked_sizes:
        npz = os.path.join(work, f"stack{n}.npz")
        if not os.path.isfile(npz):
            stacked_npz(npz, all_dir, n)
    dirs = {}
    for n in sorted(set(sizes + ort_sizes)):
        d = os.path.join(work, f"n{n}")
        if not os.path.isdir(d):
            subset(d, all_dir, n)
        dirs[n] = d
    rows = []
    for run in range(1, a.runs + 1):
        for method in a.methods.split(","):
            for n in sorted(set(sizes + ort_sizes)):
                binaries = [("infopt", a.infopt, dirs[n])]
                if a.baseline and n in base_sizes:
                    binaries.append(("infopt (baseline)", a.baseline, dirs[n]))
                if n in stacked_sizes:
                    binaries.append(("infopt, stacked .npz", a.infopt, os.path.join(work, f"stack{n}.npz")))
                for tool, binary, data in binaries if n in sizes else []:
                    out = os.path.join(work, f"ranges-{method}-{n}-{len(rows)}.json")
                    rc, wall, rss, text = timed([binary, "calibrate", a.model, "--data", data,
                                                 "--method", method, "--backend", a.backend,
                                                 "-o", out])
                    if rc != 0:
                        sys.exit(f"infopt failed ({rc}): {text[-2000:]}")
                    status = "ok"
                    if tool != "infopt":
                        # Same samples, same backend: the tables must agree
                        # with the folder's (the baseline's only where its
                        # ORT settings are the same).
                        import json
                        mine = json.load(open(os.path.join(work, f"ranges-{method}-{n}-{first_row}.json")))
                        theirs = json.load(open(out))
                        status = "ok, same ranges" if mine["tensors"] == theirs["tensors"] else "ok, ranges differ"
                    else:
                        first_row = len(rows)
                    rows.append((run, method, n, tool, wall, None, rss, status))
                    print(rows[-1], file=sys.stderr, flush=True)
                if n in ort_sizes:
                    aug = os.path.join(work, "aug.onnx")
                    limit = a.ort_limit if method != "minmax" else None
                    rc, wall, rss, text = timed([sys.executable, "-c", ORT_CHILD, a.model, dirs[n],
                                                 str(n), method, aug], limit)
                    inside = re.findall(r"inside ([0-9.]+)", text)
                    status = "ok" if rc == 0 else (f"killed at the {a.ort_limit} limit (exit {rc})"
                                                   if limit else f"exit {rc}")
                    if rc != 0 and not limit:
                        print(text[-2000:], file=sys.stderr)
                    rows.append((run, method, n, "onnxruntime", wall,
                                 float(inside[-1]) if inside else None, rss, status))
                    print(rows[-1], file=sys.stderr, flush=True)
    print(f"model `{os.path.basename(a.model)}`, samples {'rendered text lines' if a.rec else 'N(0,1) ' + a.shape}, "
          f"infopt backend {a.backend}\n")
    print("| run | method | samples | tool | wall (s) | ORT inside (s) | peak RSS (MB) | status |")
    print("|---|---|---|---|---|---|---|---|")
    for run, method, n, tool, wall, inside, rss, status in rows:
        ins = f"{inside:.2f}" if inside is not None else ""
        print(f"| {run} | {method} | {n} | {tool} | {wall:.2f} | {ins} | {rss:.0f} | {status} |")
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
