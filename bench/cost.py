"""Cost of a run: wall time and peak RSS of `infopt optimize --no-verify`
against onnxslim on the same models, in the same run (not run in CI).

    .venv/bin/python bench/make_cost_models.py /tmp/cost
    python bench/cost.py /tmp/cost/*.onnx --infopt target/release/infopt \\
        --slim-python /work/venvs/fam/bin/python [--repeat 3]

Each tool runs in its own process under /usr/bin/time (peak RSS is the
kernel's `ru_maxrss` of that process); the median wall time of the repeats is
printed, with the ratio onnxslim / infopt and infopt's peak RSS against the
budget `1.3 x model size + 50 MB`. onnxslim runs with its defaults
(`onnxslim IN OUT`), infopt with its default pipeline and `--no-verify`.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile


def timed(cmd):
    """(wall seconds, peak RSS in MB) of one run of `cmd`."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as f:
        proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", f.name, *cmd],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        wall, rss_kb = f.read().split()[-2:]
    return float(wall), int(rss_kb) / 1024


def measure(cmd, repeat):
    runs = [timed(cmd) for _ in range(repeat)]
    return statistics.median(w for w, _ in runs), max(r for _, r in runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--infopt", default="target/release/infopt")
    ap.add_argument("--slim-python", default=None, help="a Python with onnxslim (skipped without)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    out_dir = tempfile.mkdtemp(prefix="cost-")
    print(f"{'model':<22} {'MB':>7} {'infopt s':>9} {'slim s':>8} {'slim/infopt':>11} "
          f"{'infopt RSS MB':>13} {'budget MB':>9} {'slim RSS MB':>11}")
    for model in args.models:
        name = os.path.splitext(os.path.basename(model))[0]
        size = os.path.getsize(model) / 2**20
        ours = measure([args.infopt, "optimize", model, "-o", os.path.join(out_dir, f"{name}.infopt.onnx"),
                        "--no-verify"], args.repeat)
        slim = None
        if args.slim_python:
            slim = measure([args.slim_python, "-m", "onnxslim", model, os.path.join(out_dir, f"{name}.slim.onnx")],
                           args.repeat)
        budget = 1.3 * size + 50
        ratio = f"{slim[0] / ours[0]:.1f}x" if slim else "-"
        print(f"{name:<22} {size:7.1f} {ours[0]:9.2f} {slim[0] if slim else float('nan'):8.2f} {ratio:>11} "
              f"{ours[1]:13.0f} {budget:9.0f} {slim[1] if slim else float('nan'):11.0f}")


if __name__ == "__main__":
    main()
