#!/usr/bin/env python3
"""Float32 models for bench/gpu_bench.sh, exported with random weights.

Not a test. Needs torch, torchvision, transformers and numpy (the GPU
machine's image has them); nothing is downloaded.

    python3 bench/gpu_models.py OUT_DIR [--ocr DIR_WITH_PPOCR_ONNX] [--only a,b]

Writes OUT_DIR/NAME/fp32.onnx (dynamic batch; text models also dynamic
sequence), OUT_DIR/NAME/calib.npz (24 stacked random samples at the batch-1
benchmark shape, for `--int8 --calib-data`) and OUT_DIR/NAME.line,
`NAME|INPUT_SHAPES_B1|INPUT_SHAPES_BN|BATCH` for the shell script, where each
shapes field is space-separated `--input-shape` values.

Models: torchvision resnet50, efficientnet_b0 and vit_b_16; a YOLOv5s-style
detector (CSP backbone, SPPF, PAN neck, three decoded heads, 640x640, 80
classes) written here; transformers BERT-base and GPT-2 (124M) from their
default configs; PP-OCRv4 det and rec, copied from --ocr (the ONNX files of
the rapidocr-onnxruntime wheel). All exported by torch.onnx's TorchScript
exporter at opset 17 with eager attention (what most deployed exports are).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np

warnings.filterwarnings("ignore")

BATCH = int(os.environ.get("GPU_BATCH", "16"))  # the large batch of every model but the detectors
SEQ = 128
CALIB = 24


def _torch():
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(4)
    return torch


def export(model, args, path: Path, names, outs, dyn) -> None:
    torch = _torch()
    with torch.no_grad():
        torch.onnx.export(model.eval(), args, str(path), input_names=names, output_names=outs,
                          dynamic_axes=dyn, opset_version=17, dynamo=False)


def settle_batchnorm(m, shape) -> None:
    """BatchNorm statistics from a few random batches (momentum None: their
    mean), as training would leave them: with the initial mean 0 / variance 1
    a random-weight EfficientNet's logits come out near 1e-14, below float16's
    range, which says nothing about the conversion."""
    torch = _torch()
    bns = [x for x in m.modules() if isinstance(x, torch.nn.BatchNorm2d)]
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(*shape))
    m.eval()


def torchvision_model(name: str, path: Path) -> None:
    torch = _torch()
    import torchvision

    # nn.MultiheadAttention's inference fast path (aten::_native_multi_head_attention)
    # has no ONNX export: the exporter needs the composite ops.
    torch.backends.mha.set_fastpath_enabled(False)
    m = getattr(torchvision.models, name)(weights=None)
    if name.startswith("vit"):
        # torchvision initializes the classifier head to zeros: constant logits.
        torch.nn.init.normal_(m.heads.head.weight, std=0.02)
    settle_batchnorm(m, (8, 3, 224, 224))
    export(m, (torch.randn(1, 3, 224, 224),), path, ["input"], ["logits"],
           {"input": {0: "batch"}, "logits": {0: "batch"}})


def yolo(path: Path) -> None:
    torch = _torch()
    nn = torch.nn

    class Conv(nn.Module):
        def __init__(self, c1, c2, k=1, s=1):
            super().__init__()
            self.conv = nn.Conv2d(c1, c2, k, s, (k - 1) // 2, bias=False)
            self.bn = nn.BatchNorm2d(c2)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Bottleneck(nn.Module):
        def __init__(self, c, shortcut=True):
            super().__init__()
            self.cv1, self.cv2, self.add = Conv(c, c, 1), Conv(c, c, 3), shortcut

        def forward(self, x):
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C3(nn.Module):
        def __init__(self, c1, c2, n=1, shortcut=True):
            super().__init__()
            h = c2 // 2
            self.cv1, self.cv2, self.cv3 = Conv(c1, h), Conv(c1, h), Conv(2 * h, c2)
            self.m = nn.Sequential(*(Bottleneck(h, shortcut) for _ in range(n)))

        def forward(self, x):
            return self.cv3(torch.cat([self.m(self.cv1(x)), self.cv2(x)], 1))

    class SPPF(nn.Module):
        def __init__(self, c1, c2):
            super().__init__()
            h = c1 // 2
            self.cv1, self.cv2 = Conv(c1, h), Conv(4 * h, c2)
            self.m = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat([x, y1, y2, self.m(y2)], 1))

    class Yolo(nn.Module):
        def __init__(self, nc=80, size=640):
            super().__init__()
            self.nc, self.no, self.na = nc, nc + 5, 3
            self.b0 = nn.Sequential(Conv(3, 32, 6, 2), Conv(32, 64, 3, 2), C3(64, 64, 1),
                                    Conv(64, 128, 3, 2), C3(128, 128, 2))           # P3/8
            self.b1 = nn.Sequential(Conv(128, 256, 3, 2), C3(256, 256, 3))          # P4/16
            self.b2 = nn.Sequential(Conv(256, 512, 3, 2), C3(512, 512, 1), SPPF(512, 512))  # P5/32
            self.h0 = Conv(512, 256)
            self.h1 = C3(512, 256, 1, False)
            self.h2 = Conv(256, 128)
            self.h3 = C3(256, 128, 1, False)
            self.h4 = Conv(128, 128, 3, 2)
            self.h5 = C3(256, 256, 1, False)
            self.h6 = Conv(256, 256, 3, 2)
            self.h7 = C3(512, 512, 1, False)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.det = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in (128, 256, 512))
            anchors = torch.tensor([[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119],
                                    [116, 90, 156, 198, 373, 326]], dtype=torch.float32).view(3, 3, 2)
            self.strides = (8, 16, 32)
            for i, s in enumerate(self.strides):
                n = size // s
                yv, xv = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
                self.register_buffer(f"grid{i}", torch.stack((xv, yv), 2).view(1, 1, n, n, 2).float())
                self.register_buffer(f"anchor{i}", anchors[i].view(1, 3, 1, 1, 2))

        def forward(self, x):
            p3 = self.b0(x)
            p4 = self.b1(p3)
            p5 = self.b2(p4)
            t5 = self.h0(p5)
            t4 = self.h2(self.h1(torch.cat([self.up(t5), p4], 1)))
            o3 = self.h3(torch.cat([self.up(t4), p3], 1))
            o4 = self.h5(torch.cat([self.h4(o3), t4], 1))
            o5 = self.h7(torch.cat([self.h6(o4), t5], 1))
            out = []
            for i, f in enumerate((o3, o4, o5)):
                p = self.det[i](f)
                b, _, h, w = p.shape
                y = p.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
                xy = (y[..., 0:2] * 2 - 0.5 + getattr(self, f"grid{i}")) * self.strides[i]
                wh = (y[..., 2:4] * 2) ** 2 * getattr(self, f"anchor{i}")
                out.append(torch.cat((xy, wh, y[..., 4:]), -1).view(b, -1, self.no))
            return torch.cat(out, 1)

    m = Yolo()
    settle_batchnorm(m, (2, 3, 640, 640))
    export(m, (torch.randn(1, 3, 640, 640),), path, ["images"], ["detections"],
           {"images": {0: "batch"}, "detections": {0: "batch"}})


def hf(kind: str, path: Path) -> None:
    torch = _torch()
    import transformers as tf

    class Wrap(torch.nn.Module):
        def __init__(self, inner, names, outs):
            super().__init__()
            self.inner, self.names, self.outs = inner, names, outs

        def forward(self, *args):
            kw = dict(zip(self.names, args))
            kw["use_cache"] = False
            out = self.inner(**kw)
            return tuple(getattr(out, o) for o in self.outs)

    ids = torch.randint(0, 1000, (1, SEQ))
    if kind == "bert":
        names = ["input_ids", "attention_mask", "token_type_ids"]
        outs = ["last_hidden_state", "pooler_output"]
        m = Wrap(tf.BertModel(tf.BertConfig(attn_implementation="eager")), names, outs)
        args = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    else:
        names = ["input_ids", "attention_mask"]
        outs = ["last_hidden_state"]
        m = Wrap(tf.GPT2Model(tf.GPT2Config(attn_implementation="eager")), names, outs)
        args = (ids, torch.ones_like(ids))
    dyn = {n: {0: "batch", 1: "seq"} for n in names}
    dyn["last_hidden_state"] = {0: "batch", 1: "seq"}
    export(m, args, path, names, outs, dyn)


def calib(path: Path, specs: dict[str, tuple[tuple[int, ...], str]]) -> None:
    rng = np.random.default_rng(0)
    arrays = {}
    for name, (shape, kind) in specs.items():
        full = (CALIB,) + shape
        if kind == "ids":
            arrays[name] = rng.integers(0, 1000, full, dtype=np.int64)
        elif kind == "ones":
            arrays[name] = np.ones(full, dtype=np.int64)
        elif kind == "zeros":
            arrays[name] = np.zeros(full, dtype=np.int64)
        else:
            arrays[name] = rng.standard_normal(full, dtype=np.float32)
    np.savez(path, **arrays)


def _text_lines(n: int, h: int, w: int, lines: int, seed: int):
    """Images of printed text (PIL's own font), dark on light paper: what the
    OCR models are trained on, in uint8 HWC."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 .,:-/"
    out = []
    for _ in range(n):
        paper = int(rng.integers(200, 256))
        im = Image.new("RGB", (w, h), (paper, paper, paper))
        dr = ImageDraw.Draw(im)
        for li in range(lines):
            text = "".join(rng.choice(list(chars), int(rng.integers(6, 30))))
            ink = int(rng.integers(0, 80))
            y = int((li + 0.2) * h / lines)
            dr.text((int(rng.integers(2, 20)), y), text, fill=(ink, ink, ink), font_size=max(10, h // lines - 8))
        out.append(np.asarray(im))
    return np.stack(out)


def _paddle_norm(x):
    return ((x.astype(np.float32) / 255.0 - 0.5) / 0.5).transpose(0, 3, 1, 2).copy()


def _scenes(n: int, size: int, seed: int):
    """Natural-looking synthetic photos: smooth gradients, filled shapes, noise."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = rng.integers(0, 256, 3)
        yy, xx = np.mgrid[0:size, 0:size] / size
        img = (base[None, None, :] * (0.5 + 0.5 * yy[..., None]) + 60 * xx[..., None]).clip(0, 255).astype(np.uint8)
        im = Image.fromarray(img)
        dr = ImageDraw.Draw(im)
        for _ in range(int(rng.integers(3, 9))):
            x0, y0 = rng.integers(0, size, 2)
            x1, y1 = x0 + rng.integers(20, size // 2), y0 + rng.integers(20, size // 2)
            color = tuple(int(c) for c in rng.integers(0, 256, 3))
            (dr.ellipse if rng.random() < 0.5 else dr.rectangle)([int(x0), int(y0), int(x1), int(y1)], fill=color)
        arr = np.asarray(im).astype(np.float32) + rng.normal(0, 6, (size, size, 3))
        out.append(arr.clip(0, 255))
    return np.stack(out)


REAL_INPUTS = {
    "ppocr_v4_rec": lambda p, b: np.savez(p, x=_paddle_norm(_text_lines(b, 48, 320, 1, 1))),
    "ppocr_v4_det": lambda p, b: np.savez(p, x=_paddle_norm(_text_lines(b, 640, 640, 14, 2))),
    "nudenet_320n": lambda p, b: np.savez(
        p, images=(_scenes(b, 320, 3) / 255.0).astype(np.float32).transpose(0, 3, 1, 2).copy()),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--ocr", type=Path)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    only = {x for x in a.only.split(",") if x}
    img = lambda s: {"input": ((1, 3, s, s), "image")}  # noqa: E731
    text = {"input_ids": ((1, SEQ), "ids"), "attention_mask": ((1, SEQ), "ones")}
    models = {
        "resnet50": (lambda p: torchvision_model("resnet50", p), img(224), "input", (3, 224, 224), BATCH),
        "efficientnet_b0": (lambda p: torchvision_model("efficientnet_b0", p), img(224), "input",
                            (3, 224, 224), BATCH),
        "vit_b_16": (lambda p: torchvision_model("vit_b_16", p), img(224), "input", (3, 224, 224), BATCH),
        "yolov5s": (yolo, {"images": ((1, 3, 640, 640), "image")}, "images", (3, 640, 640), 8),
        "bert_base": (lambda p: hf("bert", p), {**text, "token_type_ids": ((1, SEQ), "zeros")}, None, None,
                      BATCH),
        "gpt2": (lambda p: hf("gpt2", p), text, None, None, BATCH),
    }
    if a.ocr:
        for f in sorted(a.ocr.glob("*.onnx")):
            if "det" in f.name.lower():
                models["ppocr_v4_det"] = (f, {"x": ((1, 3, 640, 640), "image")}, "x", (3, 640, 640), 8)
            elif "rec" in f.name.lower():
                models["ppocr_v4_rec"] = (f, {"x": ((1, 3, 48, 320), "image")}, "x", (3, 48, 320), BATCH)
            elif "320n" in f.name.lower():  # nudenet's YOLOv8n detector
                models["nudenet_320n"] = (f, {"images": ((1, 3, 320, 320), "image")}, "images", (3, 320, 320),
                                          BATCH)
    for name, (make, specs, image_input, chw, big) in models.items():
        if only and name not in only:
            continue
        d = a.out / name
        d.mkdir(parents=True, exist_ok=True)
        t = time.time()
        try:
            if isinstance(make, Path):
                shutil.copy(make, d / "fp32.onnx")
            else:
                make(d / "fp32.onnx")
        except Exception as e:  # reported, the others go on
            print(f"[skip] {name}: {type(e).__name__}: {str(e)[:300]}", file=sys.stderr)
            continue
        calib(d / "calib.npz", specs)
        if name in REAL_INPUTS:
            REAL_INPUTS[name](d / "real.npz", big)
        if image_input:
            dims = "x".join(map(str, chw))
            b1, bn = f"{image_input}:1x{dims}", f"{image_input}:{big}x{dims}"
        else:
            b1 = " ".join(f"{n}:1x{SEQ}" for n in specs)
            bn = " ".join(f"{n}:{big}x{SEQ}" for n in specs)
        print(f"[model] {name} exported in {time.time() - t:.0f} s", file=sys.stderr)
        # The exporter may print to stdout: the line goes to its own file.
        (a.out / f"{name}.line").write_text(f"{name}|{b1}|{bn}|{big}\n")


if __name__ == "__main__":
    main()
