"""Cost of a run: wall time and peak RSS of infopt against onnxslim on the
same models, in the same run, both WITHOUT verification (not run in CI).

    .venv/bin/python bench/make_cost_models.py /tmp/cost
    python3 bench/cost.py /tmp/cost/*.onnx --infopt target/release/infopt \\
        --slim-python /work/venvs/speed/bin/python [--repeat 5] [--markdown FILE] \\
        [--baseline OTHER_INFOPT]

What runs, each in its own process under /usr/bin/time (peak RSS is the
kernel's `ru_maxrss` of that process):

- infopt: `infopt optimize MODEL -o OUT --no-verify` (the default pipeline,
  output written atomically and fsynced, as the command always does);
- onnxslim: `python -m onnxslim MODEL OUT` (its defaults; it does not verify
  either, and does not fsync).

The two tools alternate run by run (infopt, slim, infopt, slim, ...), so load
on the machine hits both alike. With `--baseline OTHER_INFOPT` (e.g. the
release binary of main) a third process joins the rotation, and after each
model the outputs of both infopt binaries are compared byte for byte (the
model and every external-data file); a difference stops the benchmark.

Also printed per model: `floor s`, the median time of writing the bytes
infopt wrote (model plus data files) to a new file and fsyncing it, the
least any tool that writes its output durably can take on this disk (it
runs in the same rotation). Printed per model: its size (the model file
plus its external-data file), the median wall time of the repeats of each
tool, the ratio onnxslim / infopt, and infopt's largest peak RSS against the
budget `1.3 x model size + 50 MB`. The last lines check issue 19's goals:
ratio >= 20x at the median over the models and >= 10x on every model, and
RSS within budget on every model.
"""
import argparse
import filecmp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

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
    return sum(os.path.getsize(f) for f in model_files(path))


def model_files(path):
    """The model file and the `.data` files beside it whose name starts with its name."""
    folder = os.path.dirname(path) or "."
    base = os.path.basename(path)
    return [path] + sorted(os.path.join(folder, f) for f in os.listdir(folder)
                           if f.startswith(base) and f != base and f.endswith(".data"))


def durable_copy(files, out_dir):
    """Seconds to write the bytes of `files` to one new file and fsync it."""
    dst = os.path.join(out_dir, "floor.bin")
    start = time.perf_counter()
    with open(dst, "wb") as out:
        for f in files:
            with open(f, "rb") as src:
                shutil.copyfileobj(src, out, 16 << 20)
        out.flush()
        os.fsync(out.fileno())
    took = time.perf_counter() - start
    os.remove(dst)
    return took


def same_bytes(a_files, b_files):
    """True when two outputs hold the same bytes, file by file (by name suffix)."""
    if len(a_files) != len(b_files):
        return False
    return all(filecmp.cmp(a, b, shallow=False) for a, b in zip(a_files, b_files))


def median_and_peak(runs):
    return statistics.median(w for w, _ in runs), max(r for _, r in runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--infopt", default="target/release/infopt")
    ap.add_argument("--baseline", default=None,
                    help="another infopt binary (e.g. main's release): timed too, outputs compared byte for byte")
    ap.add_argument("--slim-python", default=None, help="a Python with onnxslim (skipped without)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--markdown", default=None, help="also append the table as Markdown to FILE")
    args = ap.parse_args()
    out_dir = tempfile.mkdtemp(prefix="cost-", dir=os.environ.get("COST_OUT_DIR"))
    base_dir = os.path.join(out_dir, "baseline")
    os.mkdir(base_dir)
    rows = []
    header = (f"{'model':<18} {'MB':>7} {'infopt s':>9} {'slim s':>8} {'slim/infopt':>11} "
              f"{'infopt RSS MB':>13} {'budget MB':>9} {'slim RSS MB':>11} {'floor s':>8}"
              + (f" {'baseline s':>10} {'bytes':>6}" if args.baseline else ""))
    print(header, flush=True)
    for model in args.models:
        name = os.path.splitext(os.path.basename(model))[0]
        size = model_size(model) / MB
        ours_out = os.path.join(out_dir, f"{name}.infopt.onnx")
        base_out = os.path.join(base_dir, f"{name}.infopt.onnx")
        ours_cmd = [args.infopt, "optimize", model, "-o", ours_out, "--no-verify"]
        base_cmd = [args.baseline, "optimize", model, "-o", base_out, "--no-verify"] if args.baseline else None
        slim_cmd = ([args.slim_python, "-m", "onnxslim", model, os.path.join(out_dir, f"{name}.slim.onnx")]
                    if args.slim_python else None)
        ours_runs, slim_runs, base_runs, floors = [], [], [], []
        for _ in range(args.repeat):
            ours_runs.append(timed(ours_cmd))
            if slim_cmd:
                slim_runs.append(timed(slim_cmd))
            if base_cmd:
                base_runs.append(timed(base_cmd))
            floors.append(durable_copy(model_files(ours_out), out_dir))
        ours = median_and_peak(ours_runs)
        slim = median_and_peak(slim_runs) if slim_runs else None
        base = median_and_peak(base_runs) if base_runs else None
        floor = statistics.median(floors)
        same = same_bytes(model_files(ours_out), model_files(base_out)) if base else None
        budget = 1.3 * size + 50
        ratio = slim[0] / ours[0] if slim else None
        rows.append((name, size, ours, slim, ratio, budget, floor, base, same))
        print(f"{name:<18} {size:7.1f} {ours[0]:9.2f} {slim[0] if slim else float('nan'):8.2f} "
              f"{(f'{ratio:.1f}x' if ratio else '-'):>11} {ours[1]:13.0f} {budget:9.0f} "
              f"{slim[1] if slim else float('nan'):11.0f} {floor:8.2f}"
              + (f" {base[0]:10.2f} {'same' if same else 'DIFFER':>6}" if base else ""), flush=True)
        if same is False:
            sys.exit(f"{name}: the outputs of {args.infopt} and {args.baseline} differ (kept in {out_dir})")
        for d in (out_dir, base_dir):
            for f in os.listdir(d):
                if os.path.isfile(os.path.join(d, f)):
                    os.remove(os.path.join(d, f))
    os.rmdir(base_dir)
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
    if args.baseline:
        verdict.append(f"output bytes identical to {args.baseline} on {sum(1 for r in rows if r[8])} "
                       f"of {len(rows)} models")
    for line in verdict:
        print(line)
    if args.markdown:
        with open(args.markdown, "a") as md:
            md.write("| model | MB | infopt s | onnxslim s | slim / infopt | infopt peak RSS MB | budget MB "
                     "| onnxslim peak RSS MB | durable copy s |"
                     + (" baseline s | bytes |" if args.baseline else "") + "\n"
                     + "|---" * (11 if args.baseline else 9) + "|\n")
            for name, size, ours, slim, ratio, budget, floor, base, same in rows:
                md.write(f"| {name} | {size:.1f} | {ours[0]:.2f} | {slim[0] if slim else float('nan'):.2f} | "
                         f"{f'{ratio:.1f}x' if ratio else '-'} | {ours[1]:.0f} | {budget:.0f} | "
                         f"{slim[1] if slim else float('nan'):.0f} | {floor:.2f} |"
                         + (f" {base[0]:.2f} | {'same' if same else 'differ'} |" if base else "") + "\n")
            md.write("\n" + "\n".join(f"- {line}" for line in verdict) + "\n")


if __name__ == "__main__":
    main()
