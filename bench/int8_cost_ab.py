"""The default INT8 command's wall time, two builds against each other and
against ONNX Runtime's quantizer, interleaved on the same samples.

    python bench/int8_cost_ab.py MODELS.tsv --before BIN --after BIN [--rounds 3] [--logs DIR]

MODELS.tsv: one model a line, `NAME<TAB>MODEL.onnx<TAB>CALIB_DIR` (a folder
of .npz samples; blank lines and `#` comments skipped). Each round runs, for
each model in turn, `BIN optimize MODEL --int8 --calib-data DIR -o OUT` with
the before build, then the after build (each its own process, wall time
from start to exit), then ORT's `quantize_static` (MinMax, QDQ, per-channel
S8 weights, U8 activations, the samples read before the clock starts, as
`bench/int8_cost.py` times it) in this process. Prints every run, then per
model the median of each and the after build's ratio to ORT's (the goal: at
most 2 for models under 20 MB), and whether the two builds wrote the same
bytes in every round (timing-based choices may differ at a near tie).
`--logs DIR` keeps each infopt run's stderr there (`R_NAME_before.log`), to
read what a run that stands out decided.

Needs `onnxruntime` and `numpy` in this Python; ORT_DYLIB_PATH for infopt.
"""
import argparse
import filecmp
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def ort_quantize(model, calib, out):
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    samples = [dict(np.load(f)) for f in sorted(glob.glob(os.path.join(calib, "*.npz")))]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            return next(self.it, None)

    t = time.perf_counter()
    quantize_static(
        model,
        out,
        Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        calibrate_method=CalibrationMethod.MinMax,
    )
    return time.perf_counter() - t


def infopt_run(binary, model, calib, out, log=None):
    err = open(log, "w") if log else subprocess.DEVNULL
    try:
        t = time.perf_counter()
        rc = subprocess.run(
            [binary, "optimize", model, "--int8", "--calib-data", calib, "-o", out],
            stdout=subprocess.DEVNULL,
            stderr=err,
        ).returncode
        return rc, time.perf_counter() - t
    finally:
        if log:
            err.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models")
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--logs", help="keep each infopt run's stderr in this folder")
    a = ap.parse_args()
    models = []
    for line in open(a.models):
        line = line.strip()
        if line and not line.startswith("#"):
            models.append(line.split("\t"))
    times = {m[0]: {"before": [], "after": [], "ort": []} for m in models}
    same = {m[0]: True for m in models}
    with tempfile.TemporaryDirectory() as work:
        for r in range(a.rounds):
            for name, model, calib in models:
                outs = {}
                for which in ("before", "after"):
                    outs[which] = os.path.join(work, f"{name}.{which}.onnx")
                    log = a.logs and os.path.join(a.logs, f"{r + 1}_{name}_{which}.log")
                    rc, secs = infopt_run(getattr(a, which), model, calib, outs[which], log)
                    times[name][which].append(secs)
                    print(f"round {r + 1} {name} {which}: exit {rc}, {secs:.2f} s", flush=True)
                try:
                    secs = ort_quantize(model, calib, os.path.join(work, f"{name}.ort.onnx"))
                    times[name]["ort"].append(secs)
                    print(f"round {r + 1} {name} ort quantize_static: {secs:.2f} s", flush=True)
                except Exception as e:  # noqa: BLE001 (a peer's failure is a figure too)
                    print(f"round {r + 1} {name} ort quantize_static failed: {e}", flush=True)
                if not filecmp.cmp(outs["before"], outs["after"], shallow=False):
                    same[name] = False
    print("\n| model | before | after | ORT quantize_static | after / ORT | same bytes |")
    print("|---|---|---|---|---|---|")
    for name, _, _ in models:
        t = times[name]
        med = {k: statistics.median(v) if v else float("nan") for k, v in t.items()}
        print(
            f"| {name} | {med['before']:.2f} s | {med['after']:.2f} s | {med['ort']:.2f} s"
            f" | {med['after'] / med['ort']:.2f}x | {'yes' if same[name] else 'no'} |"
        )


if __name__ == "__main__":
    sys.exit(main())
