"""Writes a copy of a model that does extra work, to check that a latency gate
catches a slowdown (figures, not a test).

    python bench/slowed_model.py MODEL.onnx OUT.onnx --cols 256

The copy computes everything the original does, plus an extra output `_extra`:
the first float input flattened to [batch, -1] times a random [features, COLS]
matrix, then Tanh. The extra work depends on the input, so no runtime can fold
it away; COLS sets its cost (calibrate it with `infopt bench MODEL --compare OUT`).
The original outputs are unchanged, so compare it with `infopt bench`, not
`infopt compare` (which would see the extra output).
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--cols", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=1, help="chain this many MatMul+Tanh")
    a = ap.parse_args()

    m = onnx.load(a.model)
    g = m.graph
    inits = {i.name for i in g.initializer}
    x = next(i for i in g.input if i.name not in inits
             and i.type.tensor_type.elem_type == TensorProto.FLOAT)
    dims = [d.dim_value for d in x.type.tensor_type.shape.dim[1:]]
    if not all(dims):
        raise SystemExit(f"{x.name}: every dim but the first must be fixed, got {dims}")
    features = math.prod(dims)
    rng = np.random.default_rng(0)
    shape = numpy_helper.from_array(np.array([-1, features], dtype=np.int64), "_extra_shape")
    g.initializer.append(shape)
    g.node.append(helper.make_node("Reshape", [x.name, "_extra_shape"], ["_extra_flat"], name="_extra_reshape"))
    prev, width = "_extra_flat", features
    for k in range(a.repeat):
        w = numpy_helper.from_array(
            (rng.standard_normal((width, a.cols)) / math.sqrt(width)).astype(np.float32), f"_extra_w{k}")
        g.initializer.append(w)
        g.node.append(helper.make_node("MatMul", [prev, w.name], [f"_extra_mm{k}"], name=f"_extra_matmul{k}"))
        out = "_extra" if k == a.repeat - 1 else f"_extra_t{k}"
        g.node.append(helper.make_node("Tanh", [f"_extra_mm{k}"], [out], name=f"_extra_tanh{k}"))
        prev, width = out, a.cols
    g.output.append(helper.make_tensor_value_info("_extra", TensorProto.FLOAT, ["batch", a.cols]))
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, a.out)
    print(f"wrote {a.out}: +{a.repeat} MatMul [{features}x{a.cols}] on {x.name}")


if __name__ == "__main__":
    main()
