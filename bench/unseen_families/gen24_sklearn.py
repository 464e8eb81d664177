# Session 24's classical-ML family: scikit-learn and LightGBM models as skl2onnx / onnxmltools write
# them (ai.onnx.ml ops; ZipMap or not; string class labels; a float64 model; a tree regressor), trained
# on scikit-learn's own digits data (load_digits: 1797 real 8x8 handwritten digits, shipped in the
# wheel), with 64 calibration and 32 held-out samples of 8 rows each.
# usage: python gen24_sklearn.py OUT_DIR   (pip install scikit-learn skl2onnx onnxmltools lightgbm)
#   -> OUT_DIR/NAME.onnx, OUT_DIR/{calib,calib_lgbm,calib64,held}/NNNN.npz
import os, sys
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from skl2onnx import to_onnx
import lightgbm as lgb
from onnxmltools import convert_lightgbm
from onnxmltools.convert.common.data_types import FloatTensorType

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
OPSETS = {"": 15, "ai.onnx.ml": 3}
X, y = load_digits(return_X_y=True)
X = X.astype(np.float32)
names = np.array("zero one two three four five six seven eight nine".split())


def save(name, onx):
    open(f"{out}/{name}.onnx", "wb").write(onx.SerializeToString())


classifiers = {
    "rf": RandomForestClassifier(n_estimators=30, max_depth=8, random_state=0).fit(X, y),
    "logreg": make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(X, y),
    "mlp": make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(128, 64), max_iter=300,
                                                         random_state=0)).fit(X, y),
    "svc": SVC(probability=True).fit(X, y),
    "mlp_str": make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(64,), max_iter=300,
                                                             random_state=0)).fit(X, names[y]),
}
for n, m in classifiers.items():
    save(n, to_onnx(m, X[:1], options={id(m): {"zipmap": False}}, target_opset=OPSETS))
    save(f"{n}_zm", to_onnx(m, X[:1], target_opset=OPSETS))
g = lgb.LGBMClassifier(n_estimators=50, verbose=-1).fit(X, y)
save("lgbm", convert_lightgbm(g, initial_types=[("input", FloatTensorType([None, 64]))], zipmap=False,
                              target_opset=15))
yf = y.astype(np.float32)
save("gbr", to_onnx(GradientBoostingRegressor(n_estimators=30).fit(X, yf), X[:1], target_opset=OPSETS))
save("ridge64", to_onnx(Ridge().fit(X.astype(np.float64), yf), X[:1].astype(np.float64), target_opset=OPSETS))
save("pca_mlp", to_onnx(make_pipeline(StandardScaler(), PCA(20), MLPRegressor(hidden_layer_sizes=(64,),
                                                                              max_iter=200, random_state=0)).fit(X, yf),
                        X[:1], target_opset=OPSETS))
for d in ("calib", "calib_lgbm", "calib64", "held"):
    os.makedirs(f"{out}/{d}", exist_ok=True)
for i in range(64):
    rows = X[i * 8:(i + 1) * 8]
    np.savez(f"{out}/calib/{i:04d}.npz", X=rows)
    np.savez(f"{out}/calib_lgbm/{i:04d}.npz", input=rows)
    np.savez(f"{out}/calib64/{i:04d}.npz", X=rows.astype(np.float64))
for i in range(32):
    np.savez(f"{out}/held/{i:04d}.npz", X=X[1000 + i * 8:1000 + (i + 1) * 8])
