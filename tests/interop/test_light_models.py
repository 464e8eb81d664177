"""ONNX's nine `light` models (in the pinned onnx wheel; placeholder weights
made by ConstantOfShape) through infopt's default command: written,
verified with ONNX Runtime as the reference, no more compute nodes than the
better of onnxsim 0.8.1 and onnxslim 0.1.98 (their figures, measured by
bench/light_models.py, are in bench/results/light_models.md; the peers do not
run here), no larger than the input plus the folding budget, and computing
what the original computes in ONNX Runtime.
"""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import _interop

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")

# Compute nodes (Constant / ConstantOfShape aside) after the better of
# onnxsim 0.8.1 and onnxslim 0.1.98 on the same file.
BEST_PEER_NODES = {
    "bvlc_alexnet": 22,
    "densenet121": 491,
    "inception_v1": 138,
    "inception_v2": 154,
    "resnet50": 123,
    "shufflenet": 154,
    "squeezenet": 65,
    "vgg19": 44,
    "zfnet512": 22,
}

# fold-constants' max_growth_bytes default: what folding may add to a model.
FOLDING_BUDGET_BYTES = 16 << 20

NOT_COMPUTE = {"Constant", "ConstantOfShape"}


def compute_nodes(path) -> int:
    return sum(1 for n in onnx.load(str(path)).graph.node if n.op_type not in NOT_COMPUTE)


def ort_outputs(path, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_every_light_model_is_listed():
    names = sorted(f[6:-5] for f in os.listdir(LIGHT) if f.startswith("light_") and f.endswith(".onnx"))
    assert names == sorted(BEST_PEER_NODES)


@pytest.mark.parametrize("name", sorted(BEST_PEER_NODES))
def test_light_model(infopt, tmp_path, name):
    src = os.path.join(LIGHT, f"light_{name}.onnx")
    out = tmp_path / "out.onnx"
    p = subprocess.run(
        [str(infopt), "optimize", src, "-o", str(out), "--json"],
        capture_output=True, text=True, timeout=_interop.CLI_TIMEOUT_S * 3,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads(p.stdout)
    v = report["verification"]
    assert v["passed"] is True
    assert v["backend"]["reference_runtime"] == "ort", v["backend"]

    nodes = compute_nodes(out)
    assert nodes <= BEST_PEER_NODES[name], f"{name}: {nodes} compute nodes, the better peer has {BEST_PEER_NODES[name]}"
    size, budget = os.path.getsize(out), os.path.getsize(src) + FOLDING_BUDGET_BYTES
    assert size <= budget, f"{name}: {size} bytes written, over input + folding budget {budget}"

    # Independently of infopt's own verification: the same outputs in ONNX
    # Runtime on seeded inputs.
    g = onnx.load(src).graph
    inits = {i.name for i in g.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in g.input:
        if i.name in inits:
            continue
        dims = [d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(dims).astype(np.float32)
    for a, b in zip(ort_outputs(src, feeds), ort_outputs(out, feeds)):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-5)
