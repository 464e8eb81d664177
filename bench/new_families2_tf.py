"""tf2onnx families not in bench/export_tf_paddle.py (helper s8). Reuses that script's exporter
(jittered random weights, dims renamed, zoo_meta.json) with other Keras models:

    /work/venvs/tf2/bin/python bench/new_families2_tf.py /tmp/nf2_tf --opsets 17
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_tf_paddle as etp  # noqa: E402


def keras_specs(opsets):
    import tensorflow as tf
    keras = tf.keras
    L = keras.layers
    rng_seed = 0

    def jittered(model, seed=rng_seed):
        import numpy as np
        rng = np.random.default_rng(seed)
        for w in model.weights:
            w.assign(etp.jitter(w.numpy(), rng))
        return model

    def efficientnet_b0():
        return jittered(keras.applications.EfficientNetB0(weights=None, input_shape=(128, 128, 3),
                                                          classifier_activation=None))

    def mobilenet_v3_small():
        return jittered(keras.applications.MobileNetV3Small(weights=None, input_shape=(128, 128, 3),
                                                            classifier_activation=None))

    def densenet121():
        return jittered(keras.applications.DenseNet121(weights=None, input_shape=(96, 96, 3),
                                                       classifier_activation=None))

    def efficientnet_b0_hw():
        return jittered(keras.applications.EfficientNetB0(weights=None, input_shape=(None, None, 3),
                                                          include_top=False, pooling="avg"))

    class ClsToken(L.Layer):
        def build(self, s):
            self.cls = self.add_weight(name="cls", shape=(1, 1, s[-1]), initializer="random_normal")
            self.pos = self.add_weight(name="pos", shape=(1, 17, s[-1]), initializer="random_normal")

        def call(self, x):
            b = tf.shape(x)[0]
            return tf.concat([tf.repeat(self.cls, b, axis=0), x], axis=1) + self.pos

    def vit():
        d, heads = 64, 4
        inp = keras.Input((32, 32, 3), name="image")
        x = L.Conv2D(d, 8, strides=8)(inp)
        x = L.Reshape((16, d))(x)
        x = ClsToken()(x)
        for _ in range(2):
            y = L.LayerNormalization(epsilon=1e-6)(x)
            y = L.MultiHeadAttention(heads, d // heads)(y, y)
            x = L.Add()([x, y])
            y = L.LayerNormalization(epsilon=1e-6)(x)
            y = L.Dense(2 * d, activation="gelu")(y)
            y = L.Dense(d)(y)
            x = L.Add()([x, y])
        x = L.LayerNormalization(epsilon=1e-6)(x)
        out = L.Dense(10, name="logits")(x[:, 0])
        return jittered(keras.Model(inp, out))

    def unet():
        inp = keras.Input((None, None, 3), name="image")
        c1 = L.Conv2D(16, 3, padding="same", activation="relu")(inp)
        p1 = L.MaxPooling2D(2)(c1)
        c2 = L.Conv2D(32, 3, padding="same", activation="relu")(p1)
        p2 = L.MaxPooling2D(2)(c2)
        b = L.Conv2D(64, 3, padding="same", activation="relu")(p2)
        b = L.BatchNormalization()(b)
        u2 = L.Conv2DTranspose(32, 2, strides=2, padding="same")(b)
        u2 = L.Concatenate()([u2, c2])
        c3 = L.Conv2D(32, 3, padding="same", activation="relu")(u2)
        u1 = L.UpSampling2D(2, interpolation="bilinear")(c3)
        u1 = L.Concatenate()([u1, c1])
        c4 = L.Conv2D(16, 3, padding="same", activation="relu")(u1)
        out = L.Conv2D(3, 1, activation="sigmoid", name="mask")(c4)
        return jittered(keras.Model(inp, out))

    class GrowingLoop(L.Layer):
        """tf.while_loop over time steps: a carried tensor that grows by tf.concat each step
        (shape invariant [None, d]) and a TensorArray of per-step outputs."""

        def call(self, x):
            n = tf.shape(x)[1]
            acc0 = tf.zeros([0, tf.shape(x)[2]], x.dtype)
            ta = tf.TensorArray(x.dtype, size=n)

            def body(i, acc, ta):
                row = tf.reduce_mean(x[:, i, :], axis=0, keepdims=True)
                acc = tf.concat([acc, row], axis=0)
                ta = ta.write(i, tf.reduce_sum(acc, axis=0))
                return i + 1, acc, ta
            _, acc, ta = tf.while_loop(lambda i, a, t: i < n, body, [0, acc0, ta],
                                       shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, None]),
                                                         tf.TensorShape(None)])
            return acc, ta.stack()

    def while_loop_model():
        inp = keras.Input((None, 8), name="x")
        h = L.Dense(8)(inp)
        acc, steps = GrowingLoop()(h)
        return jittered(keras.Model(inp, [L.Activation("linear", name="acc")(acc),
                                          L.Activation("linear", name="steps")(steps)]))

    def img(shape, dyn):
        return dict(inputs={"image": {"shape": list(shape), "dtype": "float32"}}, dynamic_axes={"image": dyn})

    S = []
    for op in opsets:
        S.append(dict(name=f"keras_efficientnet_b0_op{op}", build=efficientnet_b0, opset=op,
                      **img((1, 128, 128, 3), {0: "batch"})))
        S.append(dict(name=f"keras_efficientnet_b0_hw_op{op}", build=efficientnet_b0_hw, opset=op,
                      **img((1, 96, 128, 3), {0: "batch", 1: "height", 2: "width"})))
        S.append(dict(name=f"keras_mobilenet_v3_small_op{op}", build=mobilenet_v3_small, opset=op,
                      **img((1, 128, 128, 3), {0: "batch"})))
        S.append(dict(name=f"keras_densenet121_op{op}", build=densenet121, opset=op,
                      **img((1, 96, 96, 3), {0: "batch"})))
        S.append(dict(name=f"keras_vit_op{op}", build=vit, opset=op, **img((2, 32, 32, 3), {0: "batch"})))
        S.append(dict(name=f"keras_unet_hw_op{op}", build=unet, opset=op,
                      **img((1, 64, 96, 3), {0: "batch", 1: "height", 2: "width"})))
        S.append(dict(name=f"tf_while_loop_concat_op{op}", build=while_loop_model, opset=op,
                      inputs={"x": {"shape": [2, 5, 8], "dtype": "float32"}},
                      dynamic_axes={"x": {0: "batch", 1: "seq"}}))
    return S


etp.keras_specs = keras_specs
etp.paddle_specs = lambda opsets: []

if __name__ == "__main__":
    sys.exit(etp.main())
