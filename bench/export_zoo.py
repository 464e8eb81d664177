"""Export a zoo of small, realistic ONNX models with random weights.

Not a test: it writes models for bench/zoo_check.py and prints one line per
model (name, exporter, opset, node count, or the export error). Needs torch,
torchvision, transformers, onnx (and optionally timm and onnxscript for the
dynamo exporter) in the Python that runs it, e.g.

    /tmp/exportenv/bin/python bench/export_zoo.py [OUT_DIR]      # default /tmp/zoo

Nothing is downloaded: torchvision/timm models are built with weights=None and
transformers models from tiny configs (2 layers, hidden 64). Dynamic axes are
declared where real exports have them (batch; seq for text; H/W for OCR and
detection). Opsets vary between 11 and 18 across models. Some CNNs are exported
with training=TrainingMode.PRESERVE (in eval mode) so BatchNormalization nodes
survive instead of being folded by the exporter. Deployment variants at the
end: two fp16 exports and one with keep_initializers_as_inputs=True.

Besides the .onnx files, OUT_DIR/zoo_meta.json records for each model the
concrete input shapes and dtypes used at export time, the dynamic axes and the
valid range of integer inputs (token ids), so the checker feeds valid data.
"""
import argparse
import json
import os
import sys
import time
import traceback
import warnings

import onnx
import torch
import torch.nn as nn

warnings.filterwarnings("ignore")
torch.manual_seed(0)

TS = "torchscript"
DYNAMO = "dynamo"


# ----------------------------------------------------------------------------
# Hand-written models
# ----------------------------------------------------------------------------
class CRNN(nn.Module):
    """CRNN for text recognition: conv backbone -> (B, W', C*H') -> BiLSTM x2 -> Linear.

    Input (B, 1, 32, W) with dynamic B and W; output (W/4, B, classes) log-probs.
    """

    def __init__(self, num_classes=37, hidden=64):
        super().__init__()

        def block(cin, cout, pool):
            layers = [nn.Conv2d(cin, cout, 3, 1, 1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
            if pool is not None:
                layers.append(nn.MaxPool2d(pool, pool))
            return layers

        self.cnn = nn.Sequential(
            *block(1, 32, (2, 2)),     # 16 x W/2
            *block(32, 64, (2, 2)),    # 8 x W/4
            *block(64, 96, None),
            *block(96, 96, (2, 1)),    # 4 x W/4
            *block(96, 128, (2, 1)),   # 2 x W/4
            nn.Conv2d(128, 128, (2, 1)),  # 1 x W/4
            nn.ReLU(inplace=True),
        )
        self.rnn = nn.LSTM(128, hidden, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, num_classes)

    def forward(self, x):
        f = self.cnn(x)                    # B, C, 1, W'
        f = f.squeeze(2).permute(2, 0, 1)  # W', B, C
        y, _ = self.rnn(f)
        return self.fc(y).log_softmax(-1)


class YoloHead(nn.Module):
    """Small YOLO-style detector: conv backbone, 2 scales, anchor decode with grids
    built from the dynamic feature-map size (Shape/Range/Expand/Concat), output
    (B, N, 5 + classes)."""

    def __init__(self, num_classes=8, na=3):
        super().__init__()
        self.na, self.no = na, 5 + num_classes

        def cbs(cin, cout, s):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, s, 1, bias=False), nn.BatchNorm2d(cout), nn.SiLU())

        self.stem = nn.Sequential(cbs(3, 16, 2), cbs(16, 32, 2), cbs(32, 32, 1))
        self.s8 = cbs(32, 64, 2)
        self.s16 = cbs(64, 96, 2)
        self.head8 = nn.Conv2d(64, na * self.no, 1)
        self.head16 = nn.Conv2d(96, na * self.no, 1)
        self.register_buffer("anchors", torch.tensor([[[10., 13.], [16., 30.], [33., 23.]],
                                                       [[30., 61.], [62., 45.], [59., 119.]]]))
        self.strides = (8, 16)

    def decode(self, p, i):
        b, _, h, w = p.shape
        p = p.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).contiguous()
        yv, xv = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                                indexing="ij")
        grid = torch.stack((xv, yv), 2).view(1, 1, h, w, 2)
        ag = self.anchors[i].view(1, self.na, 1, 1, 2)
        y = p.sigmoid()
        xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.strides[i]
        wh = (y[..., 2:4] * 2) ** 2 * ag
        y = torch.cat((xy, wh, y[..., 4:]), -1)
        return y.view(b, -1, self.no)

    def forward(self, x):
        f8 = self.s8(self.stem(x))
        f16 = self.s16(f8)
        return torch.cat([self.decode(self.head8(f8), 0), self.decode(self.head16(f16), 1)], 1)


class SSDWrap(nn.Module):
    """torchvision detection models take a list of images and return a list of dicts."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        out = self.m([x[0]])[0]
        return out["boxes"], out["scores"], out["labels"]


# ----------------------------------------------------------------------------
# Model specs
# ----------------------------------------------------------------------------
def tv(name, **kw):
    import torchvision
    import torchvision.models.detection
    mod = torchvision.models.detection if hasattr(torchvision.models.detection, name) else torchvision.models
    return getattr(mod, name)(weights=None, **kw)


def resnet10():
    """torchvision ResNet-18 topology with one BasicBlock per stage (resnet18 itself is 45 MB in fp32,
    over the zoo's 30 MB budget; the op patterns are the same)."""
    from torchvision.models.resnet import BasicBlock, ResNet
    return ResNet(BasicBlock, [1, 1, 1, 1])


def image_spec(shape, dyn):
    return {"inputs": {"input": {"shape": list(shape), "dtype": "float32"}}, "dynamic_axes": {"input": dyn}}


def hf_text(cls_name, cfg_name, cfg_kw, with_type_ids=False, seq=8, vocab=None):
    def build():
        import transformers
        cfg = getattr(transformers, cfg_name)(**cfg_kw)
        cfg._attn_implementation = "eager"
        return getattr(transformers, cls_name)(cfg)
    return build


class HFWrap(nn.Module):
    """Positional inputs -> tuple of tensors (no past key values, no dicts)."""

    def __init__(self, m, names):
        super().__init__()
        self.m, self.names = m, names

    def forward(self, *args):
        kw = dict(zip(self.names, args))
        out = self.m(**kw)
        if hasattr(out, "to_tuple"):
            out = out.to_tuple()
        return tuple(o for o in out if isinstance(o, torch.Tensor))


def text_spec(names, vocab, batch=2, seq=8, out_names=("output",), out_axes=None):
    inputs, dyn = {}, {}
    for n in names:
        inputs[n] = {"shape": [batch, seq], "dtype": "int64"}
        if n == "input_ids":
            inputs[n]["range"] = [0, vocab]
        elif n == "token_type_ids":
            inputs[n]["range"] = [0, 2]
        elif n == "attention_mask":
            inputs[n]["range"] = [1, 2]
        dyn[n] = {0: "batch", 1: "seq"}
    return {"inputs": inputs, "dynamic_axes": dyn}


HF_COMMON = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                 vocab_size=1000, max_position_embeddings=128)


def specs():
    S = []

    # ---------------- classification (torchvision / timm) ----------------
    S.append(dict(name="resnet10_preserve_op13", build=resnet10, opset=13, exporter=TS,
                  training="preserve", **image_spec((1, 3, 224, 224), {0: "batch"}), outputs=["logits"]))
    S.append(dict(name="resnet10_dynamo_op18", build=resnet10, opset=18, exporter=DYNAMO,
                  **image_spec((2, 3, 224, 224), {0: "batch"}), outputs=["logits"]))
    S.append(dict(name="mobilenet_v3_small_preserve_op11", build=lambda: tv("mobilenet_v3_small"), opset=11,
                  exporter=TS, training="preserve", **image_spec((1, 3, 224, 224), {0: "batch"}),
                  outputs=["logits"]))
    S.append(dict(name="mobilenet_v3_small_hw_op16", build=lambda: tv("mobilenet_v3_small"), opset=16,
                  exporter=TS, **image_spec((1, 3, 224, 224), {0: "batch", 2: "height", 3: "width"}),
                  outputs=["logits"]))
    S.append(dict(name="efficientnet_b0_op17", build=lambda: tv("efficientnet_b0"), opset=17, exporter=TS,
                  **image_spec((1, 3, 224, 224), {0: "batch"}), outputs=["logits"]))
    S.append(dict(name="efficientnet_b0_preserve_op15", build=lambda: tv("efficientnet_b0"), opset=15,
                  exporter=TS, training="preserve", **image_spec((1, 3, 224, 224), {0: "batch"}),
                  outputs=["logits"]))
    S.append(dict(name="squeezenet1_0_nofold_op12", build=lambda: tv("squeezenet1_0"), opset=12, exporter=TS,
                  constant_folding=False, **image_spec((1, 3, 224, 224), {0: "batch"}), outputs=["logits"]))

    def timm_model(n):
        def b():
            import timm
            return timm.create_model(n, pretrained=False)
        return b
    S.append(dict(name="timm_convnext_atto_op14", build=timm_model("convnext_atto"), opset=14, exporter=TS,
                  **image_spec((1, 3, 224, 224), {0: "batch"}), outputs=["logits"]))
    S.append(dict(name="timm_vit_tiny_op17", build=timm_model("vit_tiny_patch16_224"), opset=17, exporter=TS,
                  **image_spec((1, 3, 224, 224), {0: "batch"}), outputs=["logits"]))

    # ---------------- detection ----------------
    def ssdlite():
        m = tv("ssdlite320_mobilenet_v3_large", weights_backbone=None, num_classes=91)
        return SSDWrap(m)
    S.append(dict(name="ssdlite320_mbv3_op16", build=ssdlite, opset=16, exporter=TS,
                  **image_spec((1, 3, 320, 320), {2: "height", 3: "width"}),
                  outputs=["boxes", "scores", "labels"],
                  output_axes={"boxes": {0: "n"}, "scores": {0: "n"}, "labels": {0: "n"}}))

    def frcnn():
        from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
        m = tv("fasterrcnn_mobilenet_v3_large_320_fpn", weights_backbone=None, num_classes=8)
        # the stock box head (256*7*7 -> 1024 -> 1024) alone is 51 MB: use a 128-wide one
        m.roi_heads.box_head = TwoMLPHead(256 * 7 * 7, 128)
        m.roi_heads.box_predictor = FastRCNNPredictor(128, 8)
        return SSDWrap(m)
    S.append(dict(name="fasterrcnn_mbv3_320_op11", build=frcnn, opset=11, exporter=TS,
                  **image_spec((1, 3, 320, 320), {2: "height", 3: "width"}),
                  outputs=["boxes", "scores", "labels"],
                  output_axes={"boxes": {0: "n"}, "scores": {0: "n"}, "labels": {0: "n"}}, max_mb=30))
    S.append(dict(name="yolo_head_hw_op15", build=YoloHead, opset=15, exporter=TS, training="preserve",
                  **image_spec((1, 3, 256, 256), {0: "batch", 2: "height", 3: "width"}),
                  outputs=["detections"], output_axes={"detections": {0: "batch", 1: "anchors"}}))

    # ---------------- OCR ----------------
    S.append(dict(name="crnn_bilstm_op14", build=CRNN, opset=14, exporter=TS, training="preserve",
                  **image_spec((2, 1, 32, 128), {0: "batch", 3: "width"}),
                  outputs=["log_probs"], output_axes={"log_probs": {0: "time", 1: "batch"}}))
    S.append(dict(name="crnn_bilstm_op12", build=CRNN, opset=12, exporter=TS,
                  **image_spec((2, 1, 32, 128), {0: "batch", 3: "width"}),
                  outputs=["log_probs"], output_axes={"log_probs": {0: "time", 1: "batch"}}))

    # ---------------- transformers ----------------
    gpt2_kw = dict(n_layer=2, n_embd=64, n_head=2, n_inner=128, vocab_size=1000, n_positions=128,
                   use_cache=False, bos_token_id=0, eos_token_id=0)
    bert_kw = dict(HF_COMMON, type_vocab_size=2)
    distil_kw = dict(n_layers=2, dim=64, n_heads=2, hidden_dim=128, vocab_size=1000, max_position_embeddings=128)
    t5_kw = dict(num_layers=2, d_model=64, d_kv=32, num_heads=2, d_ff=128, vocab_size=1000, use_cache=False)
    vit_kw = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                  image_size=64, patch_size=8)

    am = ["input_ids", "attention_mask"]
    S.append(dict(name="gpt2_model_op14", build=hf_text("GPT2Model", "GPT2Config", gpt2_kw), names=am,
                  opset=14, exporter=TS, **text_spec(am, 1000), outputs=["last_hidden_state"],
                  output_axes={"last_hidden_state": {0: "batch", 1: "seq"}}))
    S.append(dict(name="gpt2_lmhead_op17", build=hf_text("GPT2LMHeadModel", "GPT2Config", gpt2_kw), names=am,
                  opset=17, exporter=TS, **text_spec(am, 1000), outputs=["logits"],
                  output_axes={"logits": {0: "batch", 1: "seq"}}))
    S.append(dict(name="distilbert_op13", build=hf_text("DistilBertModel", "DistilBertConfig", distil_kw),
                  names=am, opset=13, exporter=TS, **text_spec(am, 1000), outputs=["last_hidden_state"],
                  output_axes={"last_hidden_state": {0: "batch", 1: "seq"}}))
    S.append(dict(name="t5_encoder_op15", build=hf_text("T5EncoderModel", "T5Config", t5_kw), names=am,
                  opset=15, exporter=TS, **text_spec(am, 1000), outputs=["last_hidden_state"],
                  output_axes={"last_hidden_state": {0: "batch", 1: "seq"}}))
    bt = ["input_ids", "attention_mask", "token_type_ids"]
    S.append(dict(name="bert_seqcls_op16",
                  build=hf_text("BertForSequenceClassification", "BertConfig", dict(bert_kw, num_labels=3)),
                  names=bt, opset=16, exporter=TS, **text_spec(bt, 1000), outputs=["logits"],
                  output_axes={"logits": {0: "batch"}}))
    S.append(dict(name="bert_seqcls_dynamo_op18",
                  build=hf_text("BertForSequenceClassification", "BertConfig", dict(bert_kw, num_labels=3)),
                  names=bt, opset=18, exporter=DYNAMO, **text_spec(bt, 1000), outputs=["logits"],
                  output_axes={"logits": {0: "batch"}}))
    S.append(dict(name="vit_model_op18", build=hf_text("ViTModel", "ViTConfig", vit_kw), names=["pixel_values"],
                  opset=18, exporter=TS,
                  inputs={"pixel_values": {"shape": [2, 3, 64, 64], "dtype": "float32"}},
                  dynamic_axes={"pixel_values": {0: "batch"}}, outputs=["last_hidden_state", "pooler_output"],
                  output_axes={"last_hidden_state": {0: "batch"}, "pooler_output": {0: "batch"}}))
    S.append(dict(name="vit_model_dynamo_op18", build=hf_text("ViTModel", "ViTConfig", vit_kw),
                  names=["pixel_values"], opset=18, exporter=DYNAMO,
                  inputs={"pixel_values": {"shape": [2, 3, 64, 64], "dtype": "float32"}},
                  dynamic_axes={"pixel_values": {0: "batch"}}, outputs=["last_hidden_state", "pooler_output"],
                  output_axes={"last_hidden_state": {0: "batch"}, "pooler_output": {0: "batch"}}))

    # ---------------- deployment variants ----------------
    # fp16 exports (model.half()), as shipped for GPU serving; ORT runs them on CPU too.
    S.append(dict(name="resnet10_fp16_preserve_op13", build=resnet10, opset=13, exporter=TS, training="preserve",
                  half=True, inputs={"input": {"shape": [1, 3, 224, 224], "dtype": "float16"}},
                  dynamic_axes={"input": {0: "batch"}}, outputs=["logits"]))
    S.append(dict(name="bert_fp16_op14", build=hf_text("BertModel", "BertConfig", bert_kw), names=am, opset=14,
                  exporter=TS, half=True, **text_spec(am, 1000), outputs=["last_hidden_state", "pooler_output"],
                  output_axes={"last_hidden_state": {0: "batch", 1: "seq"}, "pooler_output": {0: "batch"}}))
    # Old-style export: every initializer is also a graph input (overridable at run time).
    S.append(dict(name="resnet10_initializers_as_inputs_op11", build=resnet10, opset=11, exporter=TS,
                  training="preserve", keep_initializers_as_inputs=True,
                  **image_spec((1, 3, 224, 224), {0: "batch"}), outputs=["logits"]))
    return S


# ----------------------------------------------------------------------------
def make_inputs(spec):
    g = torch.Generator().manual_seed(0)
    xs = []
    for n, i in spec["inputs"].items():
        if i["dtype"] in ("float32", "float16"):
            x = torch.rand(i["shape"], generator=g)
            xs.append(x.half() if i["dtype"] == "float16" else x)
        else:
            lo, hi = i.get("range", [0, 2])
            xs.append(torch.randint(lo, hi, i["shape"], generator=g, dtype=torch.int64))
    return tuple(xs)


def export_one(spec, out_dir):
    path = os.path.join(out_dir, spec["name"] + ".onnx")
    torch.manual_seed(0)  # per model, so `--only` re-exports the same weights
    model = spec["build"]()
    if "names" in spec:
        model = HFWrap(model, spec["names"])
    model.eval()
    if spec.get("half"):
        model = model.half()
    args = make_inputs(spec)
    in_names = list(spec["inputs"])
    out_names = spec["outputs"]
    dyn = dict(spec["dynamic_axes"])
    dyn.update(spec.get("output_axes", {}))
    with torch.no_grad():
        model(*args)  # smoke run in eager
        if spec["exporter"] == TS:
            training = (torch.onnx.TrainingMode.PRESERVE if spec.get("training") == "preserve"
                        else torch.onnx.TrainingMode.EVAL)
            torch.onnx.export(model, args, path, opset_version=spec["opset"], input_names=in_names,
                              output_names=out_names, dynamic_axes=dyn, training=training,
                              do_constant_folding=spec.get("constant_folding", True),
                              keep_initializers_as_inputs=spec.get("keep_initializers_as_inputs", False),
                              dynamo=False)
        else:
            from torch.export import Dim
            dims = {}
            for n, axes in spec["dynamic_axes"].items():
                dims[n] = {ax: Dim(sym, min=1, max=4096) if sym != "batch" else Dim("batch", min=1, max=1024)
                           for ax, sym in axes.items()}
            # dynamic_shapes must follow the forward signature; HFWrap takes *args
            if "names" in spec:
                dyn_shapes = (tuple(dims[n] for n in in_names),)
            else:
                dyn_shapes = tuple(dims[n] for n in in_names)
            prog = torch.onnx.export(model, args, dynamo=True, opset_version=spec["opset"],
                                     input_names=in_names, output_names=out_names, dynamic_shapes=dyn_shapes,
                                     external_data=False, optimize=True, verbose=False)
            prog.save(path, external_data=False)
    m = onnx.load(path)
    mb = os.path.getsize(path) / 2**20
    limit = spec.get("max_mb", 30)
    if mb > limit:
        os.remove(path)
        raise RuntimeError(f"exported model is {mb:.1f} MB > {limit} MB; removed")
    opset = {o.domain: o.version for o in m.opset_import}.get("", None)
    return path, m, opset, mb


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir", nargs="?", default="/tmp/zoo")
    ap.add_argument("--only", default=None, help="comma-separated substrings of model names to export")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    meta_path = os.path.join(a.out_dir, "zoo_meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    only = a.only.split(",") if a.only else None
    print(f"{'model':<38} {'exporter':<11} {'opset':>5} {'nodes':>6} {'MB':>6} {'secs':>6}  notes")
    failures = 0
    for spec in specs():
        if only and not any(o in spec["name"] for o in only):
            continue
        t = time.time()
        try:
            path, m, opset, mb = export_one(spec, a.out_dir)
            ops = {n.op_type for n in m.graph.node}
            sub = sum(1 for n in m.graph.node for at in n.attribute if at.type in (5, 10))
            notes = []
            if "BatchNormalization" in ops:
                notes.append("BN")
            for o in ("Loop", "If", "NonMaxSuppression", "LSTM", "TopK", "Scan"):
                if o in ops:
                    notes.append(o)
            if sub:
                notes.append(f"{sub} subgraph attrs")
            syms = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
                    for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}}
            notes.append(" ".join(f"{k}={v}" for k, v in syms.items()))
            print(f"{spec['name']:<38} {spec['exporter']:<11} {opset:>5} {len(m.graph.node):>6} {mb:>6.2f} "
                  f"{time.time() - t:>6.1f}  {', '.join(notes)}", flush=True)
            meta[spec["name"]] = {
                "file": os.path.basename(path), "exporter": spec["exporter"], "opset": opset,
                "training": spec.get("training", "eval"), "inputs": spec["inputs"],
                "dynamic_axes": {k: {str(ax): s for ax, s in v.items()} for k, v in spec["dynamic_axes"].items()},
                "outputs": spec["outputs"],
            }
        except Exception as e:  # noqa: BLE001 - report and go on
            failures += 1
            msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            print(f"{spec['name']:<38} {spec['exporter']:<11} {spec['opset']:>5} {'-':>6} {'-':>6} "
                  f"{time.time() - t:>6.1f}  EXPORT FAILED: {msg[:300]}", flush=True)
            if os.environ.get("ZOO_TRACEBACK"):
                traceback.print_exc()
            meta.pop(spec["name"], None)
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    print(f"wrote {len(meta)} models' metadata to {meta_path}; {failures} export failures")


if __name__ == "__main__":
    sys.exit(main())
