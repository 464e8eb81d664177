# Held-out task scores of run24_sklearn.sh's outputs: classifiers by label accuracy against the
# digits' true labels (FP32's in the first column), regressors by R^2; each candidate's label
# agreement with FP32.
# usage: python score24_sklearn.py DIR OUT
import glob, os, sys
import numpy as np
import onnxruntime as ort
from sklearn.datasets import load_digits

D, OUT = sys.argv[1:3]
_, y = load_digits(return_X_y=True)
names = np.array("zero one two three four five six seven eight nine".split())
X = np.concatenate([np.load(f)["X"] for f in sorted(glob.glob(f"{D}/held/*.npz"))])
truth = y[1000:1000 + len(X)]


def first_output(path):
    so = ort.SessionOptions(); so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    i = s.get_inputs()[0]
    x = X.astype(np.float64) if "double" in i.type else X
    return np.asarray(s.run(None, {i.name: x})[0]).ravel()


print("| model | FP32 | fp16 | int8 portable | int8 onnxruntime |")
print("|---|---|---|---|---|")
for n in "rf rf_zm logreg logreg_zm mlp mlp_zm svc svc_zm mlp_str mlp_str_zm lgbm gbr ridge64 pca_mlp".split():
    ref = first_output(f"{D}/{n}.onnx")
    regressor = n in ("gbr", "ridge64", "pca_mlp")
    want = names[truth] if n.startswith("mlp_str") else truth

    def score(p):
        if regressor:
            return f"R2 {1 - ((p - truth) ** 2).sum() / ((truth - truth.mean()) ** 2).sum():.4f}"
        return f"{np.mean(p == want):.2%} ({np.mean(p == ref):.1%} = FP32)"

    cells = [score(ref)]
    for k in ("fp16", "int8_portable", "int8_onnxruntime"):
        path = f"{OUT}/{n}_{k}.onnx"
        cells.append(score(first_output(path)) if os.path.exists(path) else "not written")
    print(f"| {n} | " + " | ".join(cells) + " |")
