"""pipecat-ai==1.14.0's smart-turn v3.2 (`smart-turn-v3.2-cpu.onnx`: a
Whisper-tiny encoder and a turn-end head, shipped already quantized by ONNX
Runtime, QDQ) turned back into float32, and log-mel inputs for it.

    python bench/unseen_families/gen27_smartturn.py SMART_TURN.onnx WHISPER80.onnx OUT_DIR

The float32 model: every DequantizeLinear of an integer initializer becomes
its float weights ((q - zero point) * scale, per channel where it is), and
every QuantizeLinear -> DequantizeLinear pair on an activation is bypassed.
Its weights are the shipped ones to INT8 precision. Inputs: 3-8 s of
synthetic speech (harmonic syllables with pauses, half the clips ending in
silence: a finished turn), at -30 to -3 dBFS over faint noise, left-padded
to 8 s as pipecat does, through onnx-asr's `whisper80.onnx` preprocessor
(`onnx_asr/preprocessors/data/`), cut to 800 frames. Writes
OUT_DIR/smartturn_f32.onnx and OUT_DIR/{calib,held}/NNNN.npz (64, 100).
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

SR = 16000


def dequantized(path):
    m = onnx.load(path)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    rename, weights, dropped = {}, [], set()
    for n in g.node:
        if n.op_type != "DequantizeLinear":
            continue
        x = n.input[0]
        if x in inits:
            q = numpy_helper.to_array(inits[x]).astype(np.float32)
            scale = numpy_helper.to_array(inits[n.input[1]])
            zero = (numpy_helper.to_array(inits[n.input[2]]).astype(np.float32)
                    if len(n.input) > 2 and n.input[2] else np.zeros_like(scale))
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
            if scale.ndim == 1 and scale.size > 1:
                shape = [1] * q.ndim
                shape[axis] = -1
                scale, zero = scale.reshape(shape), zero.reshape(shape)
            weights.append(numpy_helper.from_array(((q - zero) * scale).astype(np.float32), n.output[0]))
            dropped.add(id(n))
        elif x in producer and producer[x].op_type == "QuantizeLinear":
            rename[n.output[0]] = producer[x].input[0]
            dropped.add(id(n))
    nodes = [n for n in g.node if id(n) not in dropped]
    for n in nodes:
        for i, x in enumerate(n.input):
            while x in rename:
                x = rename[x]
            n.input[i] = x
    used = {x for n in nodes for x in n.input} | {o.name for o in g.output}
    nodes = [n for n in nodes if not (n.op_type == "QuantizeLinear" and n.output[0] not in used)]
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(weights)
    used = {x for n in g.node for x in n.input}
    kept = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(kept)
    onnx.checker.check_model(m)
    return m


def main():
    model, whisper80, out = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    onnx.save(dequantized(model), os.path.join(out, "smartturn_f32.onnx"))
    ort.set_default_logger_severity(3)
    pre = ort.InferenceSession(whisper80, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(8)

    def clip():
        n = int(rng.integers(3 * SR, 8 * SR))
        x = np.zeros(n)
        pos = 0
        while pos < n:
            dur, f0 = int(rng.uniform(0.15, 0.5) * SR), rng.uniform(90, 260)
            seg = np.arange(min(dur, n - pos)) / SR
            env = np.sin(np.pi * np.arange(seg.size) / max(seg.size, 1))
            x[pos:pos + seg.size] += env * sum(np.sin(2 * np.pi * f0 * k * seg) / k for k in range(1, 6))
            pos += seg.size + int(rng.uniform(0.02, 0.3) * SR)
        if rng.random() < 0.5:
            x[int(n - rng.uniform(0.5, 1.5) * SR):] = 0
        x = x / np.abs(x).max() * 10 ** rng.uniform(-1.5, -0.3) + 10 ** rng.uniform(-4, -3) * rng.standard_normal(n)
        full = np.zeros(8 * SR, np.float32)
        full[-n:] = x
        f = pre.run(None, {"waveforms": full[None], "waveforms_lens": np.array([full.size], np.int64)})[0]
        return f[:, :, :800].astype(np.float32)

    for part, count in (("calib", 64), ("held", 100)):
        os.makedirs(os.path.join(out, part), exist_ok=True)
        for i in range(count):
            np.savez(os.path.join(out, part, f"{i:04d}.npz"), input_features=clip())


if __name__ == "__main__":
    main()
