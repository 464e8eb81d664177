"""Export BERT-base, GPT-2 (small) and ViT-base with random weights through
torch.onnx (TorchScript exporter) at opsets 14 and 17, for
bench/transformer_bench.py.

Not a test. Needs torch and transformers (e.g. /work/tvenv):

    python bench/export_transformers.py [OUT_DIR]        # default /tmp/xfm_models

Nothing is downloaded: each model is built from its default config (the
published architecture sizes) with random weights. Dynamic axes: batch and
sequence for the text models, batch for ViT. Eager attention, so the
exported graph holds the attention as MatMul/Softmax (what exporters of
these families write). At opset 14 torch writes LayerNorm decomposed
(ReduceMean, Sub, Pow, ..., Div, Mul, Add); at 17 it writes
LayerNormalization. GELU is written out at both (Gelu needs opset 20).
"""
import os
import sys
import time
import warnings

import torch

warnings.filterwarnings("ignore")
torch.manual_seed(0)


def bert():
    from transformers import BertConfig, BertModel

    ids = torch.randint(0, 1000, (1, 128))
    args = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    outs = ["last_hidden_state", "pooler_output"]
    m = _Keywords(BertModel(BertConfig(attn_implementation="eager")).eval(), names, outs).eval()
    dyn = {n: {0: "batch", 1: "seq"} for n in names}
    return m, args, names, outs, dyn


class _Keywords(torch.nn.Module):
    """Calls the model with keyword arguments (positional ones shifted
    between transformers versions) and returns plain tensors; no KV cache."""

    def __init__(self, inner, names, outputs):
        super().__init__()
        self.inner = inner
        self.names = names
        self.outputs = outputs

    def forward(self, *args):
        kw = dict(zip(self.names, args))
        if "pixel_values" not in kw:
            kw["use_cache"] = False
        out = self.inner(**kw)
        return tuple(getattr(out, o) for o in self.outputs)


def gpt2():
    from transformers import GPT2Config, GPT2Model

    m = _Keywords(GPT2Model(GPT2Config(attn_implementation="eager")).eval(),
                  ["input_ids", "attention_mask"], ["last_hidden_state"]).eval()
    ids = torch.randint(0, 1000, (1, 128))
    args = (ids, torch.ones_like(ids))
    names = ["input_ids", "attention_mask"]
    dyn = {n: {0: "batch", 1: "seq"} for n in names}
    dyn["last_hidden_state"] = {0: "batch", 1: "seq"}
    return m, args, names, ["last_hidden_state"], dyn


def vit():
    from transformers import ViTConfig, ViTModel

    outs = ["last_hidden_state", "pooler_output"]
    m = _Keywords(ViTModel(ViTConfig(attn_implementation="eager")).eval(), ["pixel_values"], outs).eval()
    args = (torch.randn(1, 3, 224, 224),)
    return m, args, ["pixel_values"], outs, {"pixel_values": {0: "batch"}}


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/xfm_models"
    os.makedirs(out_dir, exist_ok=True)
    for name, build in [("bert_base", bert), ("gpt2", gpt2), ("vit_base", vit)]:
        model, args, inputs, outputs, dyn = build()
        for opset in (14, 17):
            path = os.path.join(out_dir, f"{name}_op{opset}.onnx")
            t = time.time()
            with torch.no_grad():
                torch.onnx.export(model, args, path, input_names=inputs, output_names=outputs,
                                  dynamic_axes=dyn, opset_version=opset, dynamo=False)
            import onnx

            n = len(onnx.load(path, load_external_data=False).graph.node)
            print(f"{os.path.basename(path)}: {n} nodes, {os.path.getsize(path) / 2**20:.0f} MiB, "
                  f"{time.time() - t:.0f} s", flush=True)


if __name__ == "__main__":
    main()
