# Session 33: segmentation heads the INT8 judge had not seen, made from session 32's PAN
# (gen32_seg.py's model: skin / clothes / hair, a Sigmoid per class over logits `1272`).
#   labels_from_logits.onnx  ArgMax over the channels of the logits -> int64 class map [1, 512, 512]
#   softmax.onnx             Softmax over the channels of the logits -> [1, 3, 512, 512]
#   labels_from_probs.onnx   ArgMax over the three sigmoids (no background class: where all three are
#                            near 0 the winner is a tie broken by rounding)
# usage: python seg33_heads.py PAN.onnx OUT_DIR
# then:  infopt optimize OUT_DIR/X.onnx --int8 --target onnxruntime --calib-data DATA/calib -o X8.onnx
#        python seg33_heads.py --score OUT_DIR/X.onnx X8.onnx DATA   (label or top-1 agreement per pixel)
import glob
import os
import sys

import numpy as np


def make(pan, out):
    import onnx
    from onnx import TensorProto, helper

    os.makedirs(out, exist_ok=True)
    for name, op, src, dtype, shape in (
        ("labels_from_logits", "ArgMax", "logits", TensorProto.INT64, [1, 512, 512]),
        ("softmax", "Softmax", "logits", TensorProto.FLOAT, [1, 3, 512, 512]),
        ("labels_from_probs", "ArgMax", "probs", TensorProto.INT64, [1, 512, 512]),
    ):
        m = onnx.load(pan)
        g = m.graph
        probs = g.output[0].name
        logits = next(n for n in g.node if probs in n.output).input[0]
        x = {"logits": logits, "probs": probs}[src]
        attrs = {"axis": 1, "keepdims": 0} if op == "ArgMax" else {"axis": 1}
        g.node.append(helper.make_node(op, [x], [name], name=name + "_head", **attrs))
        del g.output[:]
        g.output.append(helper.make_tensor_value_info(name, dtype, shape))
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, os.path.join(out, name + ".onnx"))


def score(fp32, int8, data):
    import onnxruntime as ort

    a = ort.InferenceSession(fp32, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(int8, providers=["CPUExecutionProvider"])
    for part in ("calib", "held"):
        agree = []
        for f in sorted(glob.glob(os.path.join(data, part, "*.npz"))):
            x = dict(np.load(f))
            ya, yb = a.run(None, x)[0], b.run(None, x)[0]
            if ya.dtype.kind == "f":
                ya, yb = ya.argmax(1), yb.argmax(1)
            agree.append((ya == yb).mean())
        print(f"{part}: pixels agreeing mean {np.mean(agree):.5f}, lowest view {np.min(agree):.5f} ({len(agree)} views)")


if __name__ == "__main__":
    if sys.argv[1] == "--score":
        score(*sys.argv[2:5])
    else:
        make(*sys.argv[1:3])
