"""Cost of a run: wall time and peak RSS of infopt against onnxslim on the
same models, in the same run, both WITHOUT verification (not run in CI).

    .venv/bin/python bench/make_cost_models.py /tmp/cost
    python3 bench/cost.py /tmp/cost/*.onnx --infopt target/release/infopt \\
        --slim-python /work/venvs/speed/bin/python [--repeat 5] [--markdown FILE]

What runs, each in its own process under /usr/bin/time (peak RSS is the
kernel's `ru_maxrss` of that process):

- infopt: `infopt optimize MODEL -o OUT --no-verify` (the default pipeline,
  output written atomically and fsynced, as the command always does);
- onnxslim: `python -m onnxslim MODEL OUT` (its defaults; it does not verify
  either, and does not fsync).

The two tools alternate run by run (infopt, slim, infopt, slim, ...), so load
on the machine hits both alike. Printed per model: its size (the model file
plus its external-data file), the median wall time of the repeats of each
tool, the ratio onnxslim / infopt, and infopt's largest peak RSS against the
budget `1.3 x model size + 50 MB`. The last lines check issue 19's goals:
ratio >= 20x at the median over the models and >= 10x on every model, and
RSS within budget on every model.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

MB = 2**20


def timed(cmd):
    """(wall seconds, peak RSS in MB) of one run of `cmd`."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as f:
        proc = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", f.name, *cmd],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        wall, rss_kb = f.read().split()[-2:]
    return float(wall), int(rss_kb) / 1024


def model_size(path):
    """Bytes of the model and of the external-data files next to it that it names."""
    size = os.path.getsize(path)
    folder = os.path.dirname(path) or "."
    base = os.path.basename(path)
    for f in os.listdir(folder):
        if f.startswith(base) and f != base and f.endswith(".data"):
            size += os.path.getsize(os.path.join(folder, f))
    return size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--infopt", default="target/release/infopt")
    ap.add_argument("--slim-python", default=None, help="a Python with onnxslim (skipped without)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--markdown", default=None, help="also append the table as Markdown to FILE")
    args = ap.parse_args()
    out_dir = tempfile.mkdtemp(prefix="cost-", dir=os.environ.get("COST_OUT_DIR"))
    rows = []
    header = (f"{'model':<18} {'MB':>7} {'infopt s':>9} {'slim s':>8} {'slim/infopt':>11} "
              f"{'infopt RSS MB':>13} {'budget MB':>9} {'slim RSS MB':>11}")
    print(header, flush=True)
    for model in args.models:
        name = os.path.splitext(os.path.basename(model))[0]
        size = model_size(model) / MB
        ours_cmd = [args.infopt, "optimize", model, "-o", os.path.join(out_dir, f"{name}.infopt.onnx"),
                    "--no-verify"]
        slim_cmd = ([args.slim_python, "-m", "onnxslim", model, os.path.join(out_dir, f"{name}.slim.onnx")]
                    if args.slim_python else None)
        ours_runs, slim_runs = [], []
        for _ in range(args.repeat):
            ours_runs.append(timed(ours_cmd))
            if slim_cmd:
                slim_runs.append(timed(slim_cmd))
        ours = (statistics.median(w for w, _ in ours_runs), max(r for _, r in ours_runs))
        slim = (statistics.median(w for w, _ in slim_runs), max(r for _, r in slim_runs)) if slim_runs else None
        budget = 1.3 * size + 50
        ratio = slim[0] / ours[0] if slim else None
        rows.append((name, size, ours, slim, ratio, budget))
        print(f"{name:<18} {size:7.1f} {ours[0]:9.2f} {slim[0] if slim else float('nan'):8.2f} "
              f"{(f'{ratio:.1f}x' if ratio else '-'):>11} {ours[1]:13.0f} {budget:9.0f} "
              f"{slim[1] if slim else float('nan'):11.0f}", flush=True)
        for f in os.listdir(out_dir):
            os.remove(os.path.join(out_dir, f))
    os.rmdir(out_dir)
    ratios = [r[4] for r in rows if r[4]]
    over = [r[0] for r in rows if r[2][1] > r[5]]
    verdict = []
    if ratios:
        med = statistics.median(ratios)
        verdict.append(f"median slim/infopt {med:.1f}x (goal >= 20x: {'met' if med >= 20 else 'not met'}); "
                       f"lowest {min(ratios):.1f}x (goal >= 10x on every model: "
                       f"{'met' if min(ratios) >= 10 else 'not met'})")
    verdict.append(f"peak RSS within 1.3 x size + 50 MB on {len(rows) - len(over)} of {len(rows)} models"
                   + (f" (over: {', '.join(over)})" if over else ""))
    for line in verdict:
        print(line)
    if args.markdown:
        with open(args.markdown, "a") as md:
            md.write("| model | MB | infopt s | onnxslim s | slim / infopt | infopt peak RSS MB | budget MB "
                     "| onnxslim peak RSS MB |\n|---|---|---|---|---|---|---|---|\n")
            for name, size, ours, slim, ratio, budget in rows:
                md.write(f"| {name} | {size:.1f} | {ours[0]:.2f} | {slim[0] if slim else float('nan'):.2f} | "
                         f"{f'{ratio:.1f}x' if ratio else '-'} | {ours[1]:.0f} | {budget:.0f} | "
                         f"{slim[1] if slim else float('nan'):.0f} |\n")
            md.write("\n" + "\n".join(f"- {line}" for line in verdict) + "\n")


if __name__ == "__main__":
    main()
