# Task scores of session 24's unseen families (gen24.py makes the data):
#   python score24.py NAME REFERENCE.onnx HELD_DIR CAND.onnx [CAND.onnx ...]
#   smartturn: Smart Turn's end-of-turn probability (its output, a sigmoid): agreement of
#              p > 0.5 with the reference's (the shipped INT8 model, run as ONNX Runtime runs it:
#              level all, one thread), mean and largest |dp|; and the reference at ONNX
#              Runtime's level `disable` (its Q/DQ emulated in float, the function ONNX defines)
#              for scale: the shipped model's own two readings disagree by that much
import glob, sys
import numpy as np
import onnxruntime as ort

name, ref, held = sys.argv[1:4]
cands = sys.argv[4:]


def session(path, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
    so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.log_severity_level = 3
    so.graph_optimization_level = level
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


files = sorted(glob.glob(f"{held}/*.npz"))


def probs(s):
    return np.array([s.run(None, dict(np.load(f)))[0].item() for f in files])


p0 = probs(session(ref))
rows = [("reference at level disable", probs(session(ref, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)))]
rows += [(c, probs(session(c))) for c in cands]
print(f"{name}: {len(files)} held-out samples; reference {ref}: {np.mean(p0 > 0.5):.2%} predicted finished")
print("| candidate | p > 0.5 agreement | mean abs dp | max abs dp |")
print("|---|---|---|---|")
for c, p in rows:
    print(f"| {c} | {np.mean((p > 0.5) == (p0 > 0.5)):.2%} | {np.abs(p - p0).mean():.4f} | {np.abs(p - p0).max():.4f} |")
