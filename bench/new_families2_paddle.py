"""paddle2onnx families not in bench/export_tf_paddle.py (helper s8): paddle.vision MobileNetV3 (hardswish,
SE), a ViT-like encoder without mask, and a YOLO head with yolo_box + multiclass_nms (PP-YOLO-style NMS).

    /work/venvs/pd2/bin/python bench/new_families2_paddle.py /tmp/nf2_pd --opsets 17
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import export_tf_paddle as etp  # noqa: E402


def paddle_specs(opsets):
    import paddle
    import paddle.nn as nn

    def jittered(model, seed=0):
        rng = np.random.default_rng(seed)
        for t in model.state_dict().values():
            t.set_value(etp.jitter(t.numpy(), rng))
        return model

    def mbv3():
        return jittered(paddle.vision.models.mobilenet_v3_small(num_classes=10))

    class ViT(nn.Layer):
        def __init__(self, d=64, heads=4, layers=2):
            super().__init__()
            self.patch = nn.Conv2D(3, d, 8, stride=8)
            self.cls = self.create_parameter([1, 1, d])
            self.pos = self.create_parameter([1, 17, d])
            layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, activation="gelu",
                                               normalize_before=True)
            self.enc = nn.TransformerEncoder(layer, layers)
            self.head = nn.Linear(d, 10)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose([0, 2, 1])
            b = paddle.shape(x)[0]
            x = paddle.concat([self.cls.expand([b, -1, -1]), x], axis=1) + self.pos
            return self.head(self.enc(x)[:, 0])

    class YoloNMS(nn.Layer):
        def __init__(self, nc=4):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2D(3, 16, 3, 2, 1), nn.BatchNorm2D(16), nn.LeakyReLU(0.1),
                                      nn.Conv2D(16, 32, 3, 2, 1), nn.BatchNorm2D(32), nn.LeakyReLU(0.1),
                                      nn.Conv2D(32, 32, 3, 2, 1), nn.BatchNorm2D(32), nn.LeakyReLU(0.1))
            self.head = nn.Conv2D(32, 3 * (5 + nc), 1)
            self.nc = nc

        def forward(self, x, im_size):
            p = self.head(self.body(x))
            boxes, scores = paddle.vision.ops.yolo_box(p, im_size, anchors=[10, 13, 16, 30, 33, 23],
                                                       class_num=self.nc, conf_thresh=0.01, downsample_ratio=8)
            out, num = paddle.vision.ops.multiclass_nms(
                boxes, scores.transpose([0, 2, 1]), score_threshold=0.01, nms_top_k=100, keep_top_k=20,
                nms_threshold=0.45, return_rois_num=True)[:2] if hasattr(paddle.vision.ops, "multiclass_nms") \
                else (boxes, scores)
            return out, num

    S = []
    img = lambda s: dict(inputs={"image": {"shape": list(s), "dtype": "float32"}},
                         dynamic_axes={"image": {0: "batch"}})
    for op in opsets:
        S.append(dict(name=f"paddle_mobilenet_v3_small_op{op}", build=mbv3, opset=op, optimize=True,
                      **img((1, 3, 64, 64))))
        S.append(dict(name=f"paddle_vit_op{op}", build=lambda: jittered(ViT()), opset=op, optimize=True,
                      **img((2, 3, 32, 32))))
        S.append(dict(name=f"paddle_vit_noopt_op{op}", build=lambda: jittered(ViT()), opset=op, optimize=False,
                      **img((2, 3, 32, 32))))
        S.append(dict(name=f"paddle_yolo_nms_op{op}", build=lambda: jittered(YoloNMS()), opset=op, optimize=True,
                      inputs={"image": {"shape": [1, 3, 64, 64], "dtype": "float32"},
                              "im_size": {"shape": [1, 2], "dtype": "int32", "range": [64, 65]}},
                      dynamic_axes={}))
    return S


etp.paddle_specs = paddle_specs
etp.keras_specs = lambda opsets: []

if __name__ == "__main__":
    sys.exit(etp.main())
