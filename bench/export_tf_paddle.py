r"""Export random-weight TensorFlow/Keras (tf2onnx) and PaddlePaddle (paddle2onnx) models.

Not a test: it writes models for bench/zoo_check.py and prints one line per
model (name, exporter, opset, node count, or the export error). Runs under
either framework's Python: it exports what the importable framework can, e.g.

    python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install "tensorflow-cpu==2.15.1" \
        tf2onnx==1.16.1 "numpy<2" "protobuf==3.20.3" "onnxruntime==1.20.1"
    python3 -m venv /tmp/paddleenv && /tmp/paddleenv/bin/pip install paddlepaddle paddle2onnx packaging onnxruntime
    /tmp/tfenv/bin/python bench/export_tf_paddle.py [OUT_DIR]        # default /tmp/zoo_tf
    /tmp/paddleenv/bin/python bench/export_tf_paddle.py [OUT_DIR]
    /tmp/peers/bin/python bench/zoo_check.py /tmp/zoo_tf --infopt target/release/infopt

onnxruntime is optional: with it, the framework's outputs are compared with
ORT's on the exported file (column |fw-ort|). Nothing is downloaded
(weights=None, random initialisation). Weights a fresh model fills with one
value (biases 0, LayerNorm/BatchNorm scales 1, BN statistics) are jittered
like trained weights, so adds of zero and products by one do not fold away.

  * Keras (tf.keras 2.x) via tf2onnx.convert.from_keras, opsets 13 and 17:
    MobileNetV2 (224x224, dynamic batch), MobileNetV2 backbone with dynamic H/W,
    ResNet50 (if the file stays under 110 MB, else a small NHWC CNN with BN),
    a small NHWC CNN with BN/depthwise/residual (dynamic H/W), a 2-block
    transformer encoder (Embedding with mask_zero, positional embedding sliced by
    the dynamic length, MultiHeadAttention, LayerNormalization, Dense/gelu;
    dynamic batch and sequence), an Embedding+LSTM+Dense classifier and an
    Embedding+BiGRU+pool classifier (dynamic sequence).
  * Paddle via paddle.jit.save + paddle2onnx.export: a small CNN
    (Conv2D+BatchNorm+ReLU+MaxPool+Linear) and an ERNIE-like encoder (word,
    position and token-type embeddings, padding mask, nn.TransformerEncoder,
    tanh pooler), dynamic batch (and sequence); each as paddle2onnx exports it by
    default (its C++ optimizer, then Polygraphy constant folding, which installs
    onnx_graphsurgeon and sympy on first use) and, as "_noopt", with both off.

The symbolic dims of the graph inputs are renamed to batch/seq/height/width
(tf2onnx writes unk__N, paddle2onnx its own names) so zoo_check.py's extra
shape sets apply; OUT_DIR/zoo_meta.json (shared with export_zoo.py's format)
records export shapes, dtypes, dynamic axes and the range of integer inputs.
"""
import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

warnings.filterwarnings("ignore")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

VOCAB = 1000
MAX_MB = 110


def have(*mods):
    return all(importlib.util.find_spec(m) is not None for m in mods)


# ----------------------------------------------------------------------------
# shared helpers
# ----------------------------------------------------------------------------
def rename_dims(path, dyn):
    """Rename the symbolic dims of graph inputs per dyn = {input: {axis: symbol}} everywhere they occur."""
    import onnx
    m = onnx.load(path)
    ren = {}
    for i in m.graph.input:
        for ax, sym in dyn.get(i.name, {}).items():
            d = i.type.tensor_type.shape.dim[int(ax)]
            if d.HasField("dim_value") and d.dim_value > 0:
                raise RuntimeError(f"input {i.name} axis {ax} is fixed ({d.dim_value}), expected dynamic")
            if d.dim_param:
                ren[d.dim_param] = sym
            d.dim_param = sym
    for vs in (m.graph.input, m.graph.output, m.graph.value_info):
        for v in vs:
            if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape"):
                for d in v.type.tensor_type.shape.dim:
                    if d.dim_param in ren:
                        d.dim_param = ren[d.dim_param]
    onnx.save(m, path)
    return m


def jitter(v, rng):
    """A float weight holding one value everywhere (fresh biases 0, LayerNorm/BN scales 1, BN statistics) gets
    random values around it, as trained weights have: else x+0 and x*1 fold away and hide the real graph.
    Ones become U(0.5, 1.5), so variances stay positive."""
    v = np.asarray(v)
    if v.size == 0 or not np.issubdtype(v.dtype, np.floating) or not np.all(v == v.flat[0]):
        return v
    c = float(v.flat[0])
    if c == 1.0:
        return rng.uniform(0.5, 1.5, v.shape).astype(v.dtype)
    return (c + rng.normal(0, 0.1, v.shape)).astype(v.dtype)


def random_inputs(inputs, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for n, i in inputs.items():
        if i["dtype"].startswith("float"):
            out[n] = rng.random(i["shape"], dtype=np.float32).astype(i["dtype"])
        else:
            lo, hi = i.get("range", [0, 2])
            out[n] = rng.integers(lo, hi, size=i["shape"]).astype(i["dtype"])
    return out


def ort_check(path, feeds, ref):
    """Max abs difference between the framework's outputs and ONNX Runtime's (None if ORT is absent)."""
    if not have("onnxruntime"):
        return None
    import onnxruntime as ort
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = s.run(None, feeds)
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
               for a, b in zip(got, ref))


# ----------------------------------------------------------------------------
# Keras / tf2onnx
# ----------------------------------------------------------------------------
def keras_specs(opsets):
    import tensorflow as tf
    keras = tf.keras
    L = keras.layers

    def jittered(model, seed=0):
        """Every weight a fresh model sets to one value (biases, BN/LN scales and statistics) gets jittered."""
        rng = np.random.default_rng(seed)
        for w in model.weights:
            w.assign(jitter(w.numpy(), rng))
        return model

    def mobilenet_v2():
        return jittered(keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3),
                                                            classifier_activation=None))

    def mobilenet_v2_hw():
        # include_top needs a static size; the backbone with global pooling takes any H/W
        return jittered(keras.applications.MobileNetV2(weights=None, input_shape=(None, None, 3),
                                                            include_top=False, pooling="avg", alpha=0.5))

    def resnet50():
        return jittered(keras.applications.ResNet50(weights=None, classifier_activation=None))

    def small_cnn():
        x = inp = keras.Input((None, None, 3), name="image")
        x = L.Conv2D(16, 3, strides=2, padding="same", use_bias=False)(x)
        x = L.BatchNormalization()(x)
        x = L.ReLU(6.0)(x)
        for c in (16, 32, 32):
            y = L.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
            y = L.BatchNormalization()(y)
            y = L.ReLU()(y)
            y = L.Conv2D(c, 1, use_bias=False)(y)
            y = L.BatchNormalization()(y)
            x = L.Add()([x, y]) if x.shape[-1] == c else y
            x = L.MaxPooling2D(2)(x) if c == 32 else x
        x = L.GlobalAveragePooling2D()(x)
        x = L.Dropout(0.2)(x)
        out = L.Dense(10, name="logits")(x)
        return jittered(keras.Model(inp, out))

    class PosEmb(L.Layer):
        """x + position_embedding[:seq_len] with the length read from tf.shape (dynamic)."""

        def __init__(self, maxlen, d, **kw):
            super().__init__(**kw)
            self.supports_masking = True
            self.pos = L.Embedding(maxlen, d)

        def call(self, x):
            return x + self.pos(tf.range(tf.shape(x)[1]))[tf.newaxis]

    def transformer():
        d, heads = 64, 4
        ids = keras.Input((None,), dtype="int32", name="input_ids")
        x = L.Embedding(VOCAB, d, mask_zero=True)(ids)
        x = PosEmb(512, d)(x)
        for _ in range(2):
            a = L.MultiHeadAttention(heads, d // heads, dropout=0.1)(x, x)
            x = L.LayerNormalization(epsilon=1e-6)(L.Add()([x, L.Dropout(0.1)(a)]))
            f = L.Dense(4 * d, activation="gelu")(x)
            f = L.Dense(d)(f)
            x = L.LayerNormalization(epsilon=1e-6)(L.Add()([x, L.Dropout(0.1)(f)]))
        seq_out = L.Activation("linear", name="sequence")(x)
        pooled = L.GlobalAveragePooling1D()(x)
        logits = L.Dense(3, name="logits")(pooled)
        return jittered(keras.Model(ids, [logits, seq_out]))

    def lstm():
        ids = keras.Input((None,), dtype="int32", name="input_ids")
        x = L.Embedding(VOCAB, 32)(ids)
        x = L.LSTM(64)(x)
        out = L.Dense(5, activation="softmax", name="probs")(x)
        return jittered(keras.Model(ids, out))

    def bigru():
        ids = keras.Input((None,), dtype="int32", name="input_ids")
        x = L.Embedding(VOCAB, 32)(ids)
        x = L.Bidirectional(L.GRU(48, return_sequences=True))(x)
        x = L.GlobalMaxPooling1D()(x)
        out = L.Dense(4, name="logits")(x)
        return jittered(keras.Model(ids, out))

    def img(shape, dyn):
        return dict(inputs={"image": {"shape": list(shape), "dtype": "float32"}}, dynamic_axes={"image": dyn})

    def txt(seq=16):
        return dict(inputs={"input_ids": {"shape": [2, seq], "dtype": "int32", "range": [0, VOCAB]}},
                    dynamic_axes={"input_ids": {0: "batch", 1: "seq"}})

    S = []
    for op in opsets:
        S.append(dict(name=f"keras_mobilenet_v2_op{op}", build=mobilenet_v2, opset=op,
                      **img((1, 224, 224, 3), {0: "batch"})))
        S.append(dict(name=f"keras_mobilenet_v2_hw_op{op}", build=mobilenet_v2_hw, opset=op,
                      **img((1, 192, 160, 3), {0: "batch", 1: "height", 2: "width"})))
        S.append(dict(name=f"keras_resnet50_op{op}", build=resnet50, opset=op, fallback=small_cnn,
                      **img((1, 224, 224, 3), {0: "batch"})))
        S.append(dict(name=f"keras_small_cnn_hw_op{op}", build=small_cnn, opset=op,
                      **img((1, 96, 128, 3), {0: "batch", 1: "height", 2: "width"})))
        S.append(dict(name=f"keras_transformer_op{op}", build=transformer, opset=op, **txt()))
        S.append(dict(name=f"keras_lstm_cls_op{op}", build=lstm, opset=op, **txt()))
        S.append(dict(name=f"keras_bigru_cls_op{op}", build=bigru, opset=op, **txt()))
    return S


def export_keras(spec, out_dir):
    import tensorflow as tf
    import tf2onnx
    path = os.path.join(out_dir, spec["name"] + ".onnx")
    tf.keras.backend.clear_session()
    tf.random.set_seed(0)
    np.random.seed(0)
    model = spec["build"]()
    feeds = random_inputs(spec["inputs"])
    ref = model([tf.constant(feeds[n]) for n in spec["inputs"]] if len(feeds) > 1
                else tf.constant(next(iter(feeds.values()))), training=False)
    ref = [np.asarray(r) for r in (ref if isinstance(ref, (list, tuple)) else [ref])]
    sig = []
    for n, i in spec["inputs"].items():
        shape = [None if ax in spec["dynamic_axes"].get(n, {}) else s for ax, s in enumerate(i["shape"])]
        sig.append(tf.TensorSpec(shape, getattr(tf, i["dtype"]), name=n))
    tf2onnx.convert.from_keras(model, input_signature=sig, opset=spec["opset"], output_path=path)
    m = rename_dims(path, spec["dynamic_axes"])
    outputs = [o.name for o in m.graph.output]
    return path, m, feeds, ref, outputs


# ----------------------------------------------------------------------------
# Paddle / paddle2onnx
# ----------------------------------------------------------------------------
def paddle_specs(opsets):
    import paddle
    import paddle.nn as nn

    def jittered(model, seed=0):
        """Every parameter or buffer a fresh model sets to one value (biases, BN/LN scales and statistics) gets
        jittered."""
        rng = np.random.default_rng(seed)
        for t in model.state_dict().values():
            t.set_value(jitter(t.numpy(), rng))
        return model

    class CNN(nn.Layer):
        def __init__(self, num_classes=10):
            super().__init__()
            layers, cin = [], 3
            for cout in (16, 32, 64):
                layers += [nn.Conv2D(cin, cout, 3, padding=1), nn.BatchNorm2D(cout), nn.ReLU(), nn.MaxPool2D(2, 2)]
                cin = cout
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2D(1)
            self.fc = nn.Linear(64, num_classes)

        def forward(self, x):
            x = self.pool(self.features(x))
            return self.fc(paddle.flatten(x, 1))

    class Ernie(nn.Layer):
        """ERNIE-like: embeddings + LayerNorm + post-norm TransformerEncoder + tanh pooler + classifier."""

        def __init__(self, d=64, heads=4, layers=2, types=2, maxpos=512, num_classes=3):
            super().__init__()
            self.word = nn.Embedding(VOCAB, d, padding_idx=0)
            self.pos = nn.Embedding(maxpos, d)
            self.token_type = nn.Embedding(types, d)
            self.ln = nn.LayerNorm(d)
            self.drop = nn.Dropout(0.1)
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, activation="gelu",
                                               attn_dropout=0.1, act_dropout=0)
            self.encoder = nn.TransformerEncoder(layer, layers)
            self.pooler = nn.Linear(d, d)
            self.cls = nn.Linear(d, num_classes)

        def forward(self, input_ids, token_type_ids):
            seq = paddle.shape(input_ids)[1]
            pos_ids = paddle.arange(seq, dtype="int64").unsqueeze(0)
            x = self.word(input_ids) + self.pos(pos_ids) + self.token_type(token_type_ids)
            x = self.drop(self.ln(x))
            mask = paddle.unsqueeze((input_ids == 0).astype("float32") * -1e4, axis=[1, 2])
            h = self.encoder(x, src_mask=mask)
            pooled = paddle.tanh(self.pooler(h[:, 0]))
            return self.cls(pooled), h

    def cnn():
        return jittered(CNN())

    def ernie():
        return jittered(Ernie())

    img = dict(inputs={"image": {"shape": [1, 3, 64, 64], "dtype": "float32"}},
               dynamic_axes={"image": {0: "batch"}})
    txt = dict(inputs={"input_ids": {"shape": [2, 16], "dtype": "int64", "range": [0, VOCAB]},
                       "token_type_ids": {"shape": [2, 16], "dtype": "int64", "range": [0, 2]}},
               dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "token_type_ids": {0: "batch", 1: "seq"}})
    S = []
    for op in opsets:
        for opt in (True, False):
            sfx = "" if opt else "_noopt"
            S.append(dict(name=f"paddle_cnn{sfx}_op{op}", build=cnn, opset=op, optimize=opt, **img))
            S.append(dict(name=f"paddle_ernie{sfx}_op{op}", build=ernie, opset=op, optimize=opt, **txt))
    return S


def export_paddle(spec, out_dir):
    import paddle
    import paddle2onnx
    from paddle.static import InputSpec
    path = os.path.join(out_dir, spec["name"] + ".onnx")
    paddle.seed(0)
    np.random.seed(0)
    model = spec["build"]()
    model.eval()
    feeds = random_inputs(spec["inputs"])
    ref = model(*[paddle.to_tensor(v) for v in feeds.values()])
    ref = [np.asarray(r.numpy()) for r in (ref if isinstance(ref, (list, tuple)) else [ref])]
    specs = []
    for n, i in spec["inputs"].items():
        shape = [None if ax in spec["dynamic_axes"].get(n, {}) else s for ax, s in enumerate(i["shape"])]
        specs.append(InputSpec(shape, i["dtype"], n))
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "model")
        static = paddle.jit.to_static(model, input_spec=specs, full_graph=True)
        paddle.jit.save(static, prefix)
        model_file = prefix + (".json" if os.path.exists(prefix + ".json") else ".pdmodel")
        if os.path.exists(path):
            os.remove(path)
        paddle2onnx.export(model_file, prefix + ".pdiparams", path, opset_version=spec["opset"],
                           auto_upgrade_opset=False, enable_optimize=spec["optimize"],
                           optimize_tool="polygraphy" if spec["optimize"] else "none")
    if not os.path.exists(path):
        raise RuntimeError("paddle2onnx wrote no file (see its log above)")
    m = rename_dims(path, spec["dynamic_axes"])
    outputs = [o.name for o in m.graph.output]
    return path, m, feeds, ref, outputs


# ----------------------------------------------------------------------------
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir", nargs="?", default="/tmp/zoo_tf")
    ap.add_argument("--only", default=None, help="comma-separated substrings of model names to export")
    ap.add_argument("--opsets", default="13,17")
    a = ap.parse_args()
    import onnx
    os.makedirs(a.out_dir, exist_ok=True)
    opsets = [int(x) for x in a.opsets.split(",")]
    jobs = []
    if have("tensorflow", "tf2onnx"):
        import tensorflow as tf
        import tf2onnx
        print(f"tensorflow {tf.__version__}, tf2onnx {tf2onnx.__version__}, onnx {onnx.__version__}")
        jobs += [(s, "tf2onnx", export_keras) for s in keras_specs(opsets)]
    if have("paddle", "paddle2onnx"):
        import paddle
        import paddle2onnx
        print(f"paddlepaddle {paddle.__version__}, paddle2onnx {paddle2onnx.__version__}, onnx {onnx.__version__}")
        jobs += [(s, "paddle2onnx", export_paddle) for s in paddle_specs(opsets)]
    if not jobs:
        print("neither tensorflow+tf2onnx nor paddle+paddle2onnx is importable", file=sys.stderr)
        return 2
    meta_path = os.path.join(a.out_dir, "zoo_meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    only = a.only.split(",") if a.only else None
    print(f"{'model':<34} {'exporter':<11} {'opset':>5} {'nodes':>6} {'MB':>6} {'secs':>6} {'|fw-ort|':>8}  notes")
    failures = 0
    for spec, exporter, fn in jobs:
        if only and not any(o in spec["name"] for o in only):
            continue
        t = time.time()
        try:
            try:
                path, m, feeds, ref, outputs = fn(spec, a.out_dir)
                mb = os.path.getsize(path) / 2**20
                if mb > MAX_MB:
                    os.remove(path)
                    raise RuntimeError(f"{mb:.0f} MB > {MAX_MB} MB")
            except RuntimeError as e:
                if "fallback" not in spec or "MB" not in str(e):
                    raise
                print(f"  {spec['name']}: {e}; exporting the small CNN under this name instead", flush=True)
                spec = dict(spec, build=spec["fallback"])
                path, m, feeds, ref, outputs = fn(spec, a.out_dir)
                mb = os.path.getsize(path) / 2**20
            opset = {o.domain: o.version for o in m.opset_import}.get("", None)
            diff = ort_check(path, feeds, ref)
            ops = {n.op_type for n in m.graph.node}
            notes = [o for o in ("BatchNormalization", "LSTM", "GRU", "Loop", "Scan", "If") if o in ops]
            syms = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                    for i in m.graph.input if i.name not in {x.name for x in m.graph.initializer}}
            notes.append(" ".join(f"{k}={v}" for k, v in syms.items()))
            print(f"{spec['name']:<34} {exporter:<11} {opset:>5} {len(m.graph.node):>6} {mb:>6.2f} "
                  f"{time.time() - t:>6.1f} {'-' if diff is None else f'{diff:.1e}':>8}  {', '.join(notes)}",
                  flush=True)
            meta[spec["name"]] = {
                "file": os.path.basename(path), "exporter": exporter, "opset": opset, "inputs": spec["inputs"],
                "dynamic_axes": {k: {str(ax): s for ax, s in v.items()} for k, v in spec["dynamic_axes"].items()},
                "outputs": outputs,
            }
        except Exception as e:  # noqa: BLE001 - report and go on
            failures += 1
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            print(f"{spec['name']:<34} {exporter:<11} {spec['opset']:>5} {'-':>6} {'-':>6} "
                  f"{time.time() - t:>6.1f} {'-':>8}  EXPORT FAILED: {msg[:300]}", flush=True)
            if os.environ.get("ZOO_TRACEBACK"):
                traceback.print_exc()
            meta.pop(spec["name"], None)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    print(f"wrote {len(meta)} models' metadata to {meta_path}; {failures} export failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
