#!/usr/bin/env python3
"""Export BERT-base, GPT-2 (small) and ViT-base from transformers configs
(random weights, no hub access) with torch.onnx's TorchScript exporter.

    /work/tvenv/bin/python bench/export_transformers.py OUT_DIR [--opsets 14,17] [--attn eager]

Writes OUT_DIR/{bert,gpt2,vit}_op{N}.onnx with dynamic batch (and sequence
for the text models). Weights come from a fixed torch seed. Default sizes are
the real ones (12 layers, hidden 768, 12 heads); these files are ~330-530 MB
and are not committed.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch


def bert(attn: str):
    from transformers import BertConfig, BertModel

    cfg = BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    cfg._attn_implementation = attn
    model = BertModel(cfg, add_pooling_layer=True).eval()

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            o = self.m(input_ids=input_ids, attention_mask=attention_mask,
                       token_type_ids=token_type_ids, return_dict=True)
            return o.last_hidden_state, o.pooler_output

    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    args = (ids, torch.ones(2, 16, dtype=torch.int64), torch.zeros(2, 16, dtype=torch.int64))
    dyn = {0: "batch", 1: "seq"}
    names = ["input_ids", "attention_mask", "token_type_ids"]
    outs = ["last_hidden_state", "pooler_output"]
    axes = {n: dyn for n in names} | {"last_hidden_state": dyn, "pooler_output": {0: "batch"}}
    return Wrapper().eval(), args, names, outs, axes


def gpt2(attn: str):
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    cfg._attn_implementation = attn
    model = GPT2Model(cfg).eval()

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask):
            o = self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, return_dict=True)
            return o.last_hidden_state

    ids = torch.randint(0, cfg.vocab_size, (2, 16))
    args = (ids, torch.ones(2, 16, dtype=torch.int64))
    dyn = {0: "batch", 1: "seq"}
    names = ["input_ids", "attention_mask"]
    return Wrapper().eval(), args, names, ["last_hidden_state"], {n: dyn for n in names} | {"last_hidden_state": dyn}


def vit(attn: str):
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    cfg._attn_implementation = attn
    model = ViTModel(cfg, add_pooling_layer=False).eval()

    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, pixel_values):
            return self.m(pixel_values=pixel_values, return_dict=True).last_hidden_state

    args = (torch.randn(2, 3, 224, 224),)
    return Wrapper().eval(), args, ["pixel_values"], ["last_hidden_state"], {
        "pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"}}


MODELS = {"bert": bert, "gpt2": gpt2, "vit": vit}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--opsets", default="14,17")
    ap.add_argument("--models", default="bert,gpt2,vit")
    ap.add_argument("--attn", default="eager", help="transformers attention implementation (eager, sdpa)")
    a = ap.parse_args(argv[1:])
    a.out.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    for name in a.models.split(","):
        for opset in map(int, a.opsets.split(",")):
            torch.manual_seed(0)
            model, args, names, outs, axes = MODELS[name](a.attn)
            suffix = "" if a.attn == "eager" else f"_{a.attn}"
            path = a.out / f"{name}_op{opset}{suffix}.onnx"
            with torch.no_grad():
                torch.onnx.export(model, args, str(path), dynamo=False, opset_version=opset,
                                  input_names=names, output_names=outs, dynamic_axes=axes)
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
