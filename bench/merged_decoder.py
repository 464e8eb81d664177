"""An Optimum-style merged decoder (decoder_model_merged.onnx): one If on `use_cache_branch` whose
then-branch is the decoder with past and else-branch the decoder without past; all initializers
(deduplicated by content) in the main graph, the past inputs always present.

    PY=/work/venvs/zoo/bin/python
    nice -n 10 $PY bench/merged_decoder.py /tmp/nf2 [llama|mistral|gpt2]
"""
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import onnx  # noqa: E402
import torch  # noqa: E402
from onnx import TensorProto, helper as h  # noqa: E402

from new_families import DecoderWithPast  # noqa: E402
from new_families2 import DEC  # noqa: E402

CFGS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(DEC, num_key_value_heads=2), 2, 16),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(DEC, num_key_value_heads=2, sliding_window=5), 2, 16),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_layer=2, n_embd=64, n_head=2, n_inner=128, vocab_size=1000,
                                                    n_positions=256), 2, 32),
}


def export_pair(kind, tmp):
    import transformers
    cfg_name, model_name, kw, kv, hd = CFGS[kind]
    layers = 2
    torch.manual_seed(0)
    Wrap = DecoderWithPast.build(cfg_name, model_name, kw)
    with_past = Wrap().eval()

    class NoPast(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m.m

        def forward(self, input_ids, attention_mask, position_ids):
            out = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         use_cache=True)
            pkv = out.past_key_values
            pres = []
            for i in range(layers):
                lay = pkv.layers[i]
                pres += [lay.keys, lay.values]
            return (out.logits, *pres)
    no_past = NoPast(with_past).eval()
    outs = ["logits"] + [f"present.{i}.{t}" for i in range(layers) for t in ("key", "value")]
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 1000, (2, 3), generator=g)
    pos = torch.arange(4, 7).repeat(2, 1)
    past = [torch.rand(2, kv, 4, hd, generator=g) for _ in range(2 * layers)]
    dyn_out = {"logits": {0: "batch_size", 1: "sequence_length"}}
    for o in outs[1:]:
        dyn_out[o] = {0: "batch_size", 2: "past_sequence_length + sequence_length"}
    pnames = [f"past_key_values.{i}.{t}" for i in range(layers) for t in ("key", "value")]
    dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"},
           "attention_mask": {0: "batch_size", 1: "past_sequence_length + sequence_length"},
           "position_ids": {0: "batch_size", 1: "sequence_length"}}
    a = os.path.join(tmp, f"{kind}_with_past.onnx")
    b = os.path.join(tmp, f"{kind}_no_past.onnx")
    with torch.no_grad():
        torch.onnx.export(with_past, (ids, torch.ones(2, 7, dtype=torch.int64), pos, *past), a, opset_version=17,
                          input_names=["input_ids", "attention_mask", "position_ids", *pnames], output_names=outs,
                          dynamic_axes={**dyn, **{p: {0: "batch_size", 2: "past_sequence_length"} for p in pnames},
                                        **dyn_out}, dynamo=False)
        torch.onnx.export(no_past, (ids, torch.ones(2, 3, dtype=torch.int64), torch.arange(3).repeat(2, 1)), b,
                          opset_version=17, input_names=["input_ids", "attention_mask", "position_ids"],
                          output_names=outs,
                          dynamic_axes={**dyn, "attention_mask": {0: "batch_size", 1: "sequence_length"},
                                        **{o: {0: "batch_size", 2: "sequence_length"} for o in outs[1:]},
                                        "logits": {0: "batch_size", 1: "sequence_length"}}, dynamo=False)
    return onnx.load(a), onnx.load(b), kv, hd, pnames, outs


def merge(wp, np_, pnames, outs):
    top_inits, by_hash = [], {}

    def take(graph, prefix):
        """Move the graph's initializers to the top (dedup by content), prefix every other name."""
        rename = {}
        for t in graph.initializer:
            key = hashlib.sha1(t.SerializeToString().replace(t.name.encode(), b"")).hexdigest() + str(t.data_type)
            if key not in by_hash:
                nt = onnx.TensorProto()
                nt.CopyFrom(t)
                nt.name = f"w{len(by_hash)}"
                by_hash[key] = nt.name
                top_inits.append(nt)
            rename[t.name] = by_hash[key]
        keep = {i.name for i in graph.input} | {o.name for o in graph.output}
        for n in graph.node:
            n.name = prefix + n.name
            for i, x in enumerate(n.input):
                if x in rename:
                    n.input[i] = rename[x]
                elif x and x not in keep:
                    n.input[i] = prefix + x
            for i, x in enumerate(n.output):
                if x not in keep:
                    n.output[i] = prefix + x
        # graph outputs keep their names inside the branch only if produced by a node: add Identity
        outs_ = []
        for o in graph.output:
            new = prefix + "out_" + o.name
            for n in graph.node:
                for i, x in enumerate(n.output):
                    if x == o.name:
                        n.output[i] = new
                for i, x in enumerate(n.input):
                    if x == o.name:
                        n.input[i] = new
            graph.node.append(h.make_node("Identity", [new], [o.name + "_" + prefix.strip("_")]))
            vo = onnx.ValueInfoProto()
            vo.CopyFrom(o)
            vo.name = o.name + "_" + prefix.strip("_")
            # the two branches give `present` different symbolic lengths: leave dims unnamed
            for d in vo.type.tensor_type.shape.dim:
                if d.HasField("dim_param"):
                    d.dim_param = ""
                    d.ClearField("dim_param")
            outs_.append(vo)
        return h.make_graph(list(graph.node), prefix + "branch", [], outs_)
    then_g = take(wp.graph, "wp_")
    else_g = take(np_.graph, "np_")
    ifn = h.make_node("If", ["use_cache_branch"], outs, then_branch=then_g, else_branch=else_g,
                      name="optimum::if")
    inputs = list(wp.graph.input) + [h.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])]
    outputs = []
    for o in wp.graph.output:
        vo = onnx.ValueInfoProto()
        vo.CopyFrom(o)
        outputs.append(vo)
    # Optimum's merged graph squeezes use_cache_branch? No: If takes a 1-element bool tensor directly.
    g = h.make_graph([ifn], "merged", inputs, outputs, top_inits)
    m = h.make_model(g, opset_imports=list(wp.opset_import), ir_version=wp.ir_version)
    onnx.checker.check_model(m)
    return m


def main():
    work = sys.argv[1] if len(sys.argv) > 1 else "/tmp/nf2"
    kinds = sys.argv[2:] or ["llama", "gpt2"]
    tmp = os.path.join(work, "merge_tmp")
    os.makedirs(tmp, exist_ok=True)
    meta_path = os.path.join(work, "zoo_meta.json")
    meta = json.load(open(meta_path))
    for kind in kinds:
        wp, np_, kv, hd, pnames, outs = export_pair(kind, tmp)
        m = merge(wp, np_, pnames, outs)
        name = f"{kind}_merged_if_op17"
        onnx.save(m, os.path.join(work, name + ".onnx"))
        inputs = {"input_ids": {"shape": [2, 3], "dtype": "int64", "range": [0, 1000]},
                  "attention_mask": {"shape": [2, 7], "dtype": "int64", "range": [1, 2]},
                  "position_ids": {"shape": [2, 3], "dtype": "int64", "range": [4, 5]}}
        for p in pnames:
            inputs[p] = {"shape": [2, kv, 4, hd], "dtype": "float32"}
        inputs["use_cache_branch"] = {"shape": [1], "dtype": "bool"}
        meta[name] = {"file": name + ".onnx", "exporter": "torchscript+merge", "opset": 17, "inputs": inputs,
                      "dynamic_axes": {}, "outputs": outs}
        print(name, len(m.graph.node), "top-level nodes;",
              sum(len(a.g.node) for a in m.graph.node[0].attribute), "in branches;", len(m.graph.initializer), "inits")
    json.dump(meta, open(meta_path, "w"), indent=1)


if __name__ == "__main__":
    main()
