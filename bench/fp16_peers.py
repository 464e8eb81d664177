#!/usr/bin/env python3
"""float16 conversion: infopt vs onnxconverter-common vs NVIDIA ModelOpt AutoCast.

Usage (a venv with torch, torchvision, transformers, rapidocr-onnxruntime,
onnxconverter-common, nvidia-modelopt, onnx, onnxruntime):

    python bench/fp16_peers.py --infopt target/release/infopt --work /tmp/fp16bench \
        [--models resnet18,bert] [--json out.json] [--markdown out.md]

Models (random weights; nothing is downloaded but the pip packages):
  torchvision resnet18, mobilenet_v3_small, efficientnet_b0 (TorchScript
  exporter, opset 17, batch 1x3x224x224); transformers BERT, GPT-2 and ViT
  from small random-init configs (4 layers, hidden 256); the PaddleOCR
  det/rec/cls models shipped in the rapidocr-onnxruntime wheel.

For each model and converter (each with keep_io_types, float32 in/out):
loads in ONNX Runtime CPU?, inf/NaN in the outputs?, the smallest cosine vs
float32 over the outputs on two held-out random inputs, node count, Cast
count, file size. `strict cos` runs the float16 model in onnx's reference
evaluator, which rounds every op's result to float16 the way a GPU kernel
does (ONNX Runtime's CPU provider computes most float16 ops in float32
through Casts it inserts itself, which hides overflow); it is skipped for
models where the reference evaluator is too slow (--strict-max-nodes).

infopt runs with `--passes convert-float16` (the same graph as the peers get)
and with `--fp16` (the default pipeline's fusions first).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import traceback
import zlib
from pathlib import Path

import numpy as np
import onnx

CONVERTERS = ["infopt", "infopt+fusions", "onnxconverter-common", "modelopt-autocast"]


# ------------------------------------------------------------------ models

def export_torchvision(name: str, path: Path) -> None:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, (x,), str(path), opset_version=17, input_names=["input"],
                      output_names=["logits"], dynamo=False)


def export_hf(kind: str, path: Path) -> None:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    common = dict(num_hidden_layers=4, num_attention_heads=4, hidden_size=256, intermediate_size=1024)
    if kind == "bert":
        model = tf.BertModel(tf.BertConfig(vocab_size=1000, attn_implementation="eager", **common)).eval()
        ids = torch.randint(0, 1000, (1, 64))
        args = (ids, torch.ones_like(ids))
        names = ["input_ids", "attention_mask"]
    elif kind == "gpt2":
        cfg = tf.GPT2Config(vocab_size=1000, n_layer=4, n_head=4, n_embd=256, n_positions=128,
                            attn_implementation="eager", use_cache=False)
        model = tf.GPT2Model(cfg).eval()
        ids = torch.randint(0, 1000, (1, 64))
        # With an explicit mask transformers skips its packed-sequence
        # detection (torch.diff, which the TorchScript exporter lacks).
        args = (ids, torch.ones_like(ids))
        names = ["input_ids", "attention_mask"]
    elif kind == "vit":
        model = tf.ViTModel(tf.ViTConfig(image_size=224, patch_size=16, attn_implementation="eager",
                                         **common)).eval()
        args = (torch.randn(1, 3, 224, 224),)
        names = ["pixel_values"]
    else:
        raise ValueError(kind)

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *a):
            return self.m(**dict(zip(names, a)), return_dict=False)[0]

    torch.onnx.export(Wrap(model), args, str(path), opset_version=17, input_names=names,
                      output_names=["hidden"], dynamo=False)


def rapidocr_models() -> dict[str, Path]:
    import rapidocr_onnxruntime

    root = Path(rapidocr_onnxruntime.__file__).parent / "models"
    out = {}
    for p in sorted(root.glob("*.onnx")):
        stem = p.stem.lower()
        kind = "det" if "det" in stem else "rec" if "rec" in stem else "cls" if "cls" in stem else stem
        out[f"paddleocr-{kind}"] = p
    return out


def build_models(work: Path, wanted: set[str] | None) -> dict[str, Path]:
    models_dir = work / "models"
    models_dir.mkdir(parents=True, exist_ok=True)
    makers = {
        "resnet18": lambda p: export_torchvision("resnet18", p),
        "mobilenet_v3_small": lambda p: export_torchvision("mobilenet_v3_small", p),
        "efficientnet_b0": lambda p: export_torchvision("efficientnet_b0", p),
        "bert": lambda p: export_hf("bert", p),
        "gpt2": lambda p: export_hf("gpt2", p),
        "vit": lambda p: export_hf("vit", p),
    }
    out: dict[str, Path] = {}
    for name, make in makers.items():
        if wanted and name not in wanted:
            continue
        path = models_dir / f"{name}.onnx"
        if not path.exists():
            try:
                make(path)
            except Exception as e:  # a model that cannot be exported is reported, not fatal
                print(f"[skip] {name}: export failed: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
                continue
        out[name] = path
    try:
        for name, p in rapidocr_models().items():
            if not wanted or name in wanted:
                out[name] = p
    except ImportError:
        print("[skip] rapidocr-onnxruntime not installed", file=sys.stderr)
    return out


# -------------------------------------------------------------- converters

def convert(tool: str, src: Path, dst: Path, infopt: Path) -> str | None:
    """Writes the float16 model to dst; returns an error message or None."""
    try:
        if tool in ("infopt", "infopt+fusions"):
            args = [str(infopt), "optimize", str(src), "-o", str(dst), "--no-verify", "--json"]
            args += ["--fp16"] if tool == "infopt+fusions" else ["--passes", "convert-float16"]
            p = subprocess.run(args, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                return p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
        elif tool == "onnxconverter-common":
            from onnxconverter_common import float16

            m = float16.convert_float_to_float16(onnx.load(str(src)), keep_io_types=True)
            onnx.save(m, str(dst))
        elif tool == "modelopt-autocast":
            from modelopt.onnx.autocast import convert_to_mixed_precision

            m = convert_to_mixed_precision(str(src), low_precision_type="fp16", keep_io_types=True)
            onnx.save(m, str(dst))
        else:
            raise ValueError(tool)
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return None


# ----------------------------------------------------------------- metrics

_NP = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
       "tensor(int32)": np.int32, "tensor(bool)": np.bool_, "tensor(double)": np.float64}


# Image sizes for inputs with dynamic spatial dims (PaddleOCR's own defaults).
SHAPES = {"paddleocr-det": [1, 3, 320, 320], "paddleocr-rec": [1, 3, 48, 320],
          "paddleocr-cls": [1, 3, 48, 192]}


def inputs_for(sess, key: str, model: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    feeds = {}
    for i in sess.get_inputs():
        shape = SHAPES.get(model) or [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        dt = _NP[i.type]
        if np.issubdtype(dt, np.floating):
            feeds[i.name] = rng.standard_normal(shape).astype(dt)
        elif dt == np.bool_:
            feeds[i.name] = np.ones(shape, bool)
        elif "mask" in i.name:
            feeds[i.name] = np.ones(shape, dt)
        else:
            feeds[i.name] = rng.integers(0, 100, size=shape).astype(dt)
    return feeds


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = np.nan_to_num(a.astype(np.float64).ravel(), nan=0.0, posinf=0.0, neginf=0.0)
    b = np.nan_to_num(b.astype(np.float64).ravel(), nan=0.0, posinf=0.0, neginf=0.0)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0:
        return 0.0
    return float(a @ b / (na * nb))


def count_nodes(m: onnx.ModelProto) -> tuple[int, int]:
    nodes, casts = 0, 0

    def walk(g):
        nonlocal nodes, casts
        for n in g.node:
            nodes += 1
            casts += n.op_type == "Cast"
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)

    walk(m.graph)
    return nodes, casts


# The reference evaluator runs convolutions in numpy: minutes for a ResNet.
STRICT_MAX_BYTES = 6 << 20


class Timeout(Exception):
    pass


def _alarm(*_):
    raise Timeout()


def strict_outputs(path: Path, feeds, seconds: int):
    from onnx.reference import ReferenceEvaluator

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        return ReferenceEvaluator(str(path)).run(None, feeds)
    finally:
        signal.alarm(0)


def measure(name: str, src: Path, work: Path, infopt: Path, strict_max_nodes: int,
            strict_seconds: int) -> list[dict]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    feeds = [inputs_for(ref, f"{name}-held-out-{k}", name) for k in (1, 2)]
    expected = [ref.run(None, f) for f in feeds]
    base_nodes, base_casts = count_nodes(onnx.load(str(src)))
    rows = [dict(model=name, tool="float32", loads=True, finite=True, cosine=1.0, strict_cosine=None,
                 strict_finite=None, nodes=base_nodes, casts=base_casts, bytes=src.stat().st_size,
                 error=None, seconds=0.0)]
    for tool in CONVERTERS:
        dst = work / "out" / f"{name}.{tool}.onnx"
        dst.parent.mkdir(parents=True, exist_ok=True)
        t = time.time()
        err = convert(tool, src, dst, infopt)
        row = dict(model=name, tool=tool, loads=False, finite=None, cosine=None, strict_cosine=None,
                   strict_finite=None, nodes=None, casts=None, bytes=None, error=err,
                   seconds=round(time.time() - t, 2))
        rows.append(row)
        if err:
            continue
        m = onnx.load(str(dst))
        row["nodes"], row["casts"] = count_nodes(m)
        row["bytes"] = dst.stat().st_size
        try:
            sess = ort.InferenceSession(str(dst), so, providers=["CPUExecutionProvider"])
            row["loads"] = True
            finite, cos = True, 1.0
            for f, e in zip(feeds, expected):
                got = sess.run(None, f)
                for a, b in zip(e, got):
                    if np.issubdtype(np.asarray(b).dtype, np.floating):
                        finite &= bool(np.isfinite(b).all())
                        cos = min(cos, cosine(a, b))
            row["finite"], row["cosine"] = finite, cos
        except Exception as e:
            row["error"] = f"ORT: {str(e).splitlines()[0][:200]}"
            continue
        if row["nodes"] <= strict_max_nodes and row["bytes"] <= STRICT_MAX_BYTES:
            try:
                got = strict_outputs(dst, feeds[0], strict_seconds)
                row["strict_finite"] = all(bool(np.isfinite(g).all()) for g in got
                                           if np.issubdtype(np.asarray(g).dtype, np.floating))
                row["strict_cosine"] = min(cosine(a, b) for a, b in zip(expected[0], got))
            except Timeout:
                row["strict_cosine"] = "timeout"
            except Exception as e:
                row["strict_cosine"] = f"error: {type(e).__name__}"
    return rows


def fmt(v, digits=5):
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "**NO**"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def markdown(rows: list[dict]) -> str:
    head = ("| model | converter | loads (ORT CPU) | finite | min cosine | strict-fp16 cosine | nodes | Casts "
            "| size (KB) | note |\n|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        strict = r["strict_cosine"]
        if isinstance(strict, float):
            strict = f"{strict:.5f}" + ("" if r["strict_finite"] else " (inf/NaN)")
        lines.append("| " + " | ".join([
            r["model"], r["tool"], fmt(r["loads"]), fmt(r["finite"]), fmt(r["cosine"]), fmt(strict),
            fmt(r["nodes"]), fmt(r["casts"]),
            fmt(None if r["bytes"] is None else round(r["bytes"] / 1024)),
            (r["error"] or "").replace("|", "/")[:120],
        ]) + " |")
    return head + "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--infopt", type=Path, default=Path("target/release/infopt"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/fp16bench"))
    ap.add_argument("--models", default="", help="comma-separated subset")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--strict-max-nodes", type=int, default=400)
    ap.add_argument("--strict-seconds", type=int, default=120)
    a = ap.parse_args()
    wanted = set(filter(None, a.models.split(","))) or None
    models = build_models(a.work, wanted)
    rows: list[dict] = []
    for name, path in models.items():
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            rows += measure(name, path, a.work, a.infopt.resolve(), a.strict_max_nodes, a.strict_seconds)
        except Exception:
            traceback.print_exc()
    md = markdown(rows)
    print(md)
    if a.markdown:
        a.markdown.write_text(md)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
