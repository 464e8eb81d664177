"""New model families (issue 19): export them, then measure infopt's default command against onnxsim and onnxslim.

Not a test. Two steps, each printing one line per model:

    PY=/work/venvs/zoo/bin/python          # torch, torchvision, transformers, skl2onnx, onnxsim, onnxslim
    $PY bench/new_families.py export WORK [--only SUBSTR,..]
    ORT_DYLIB_PATH=... $PY bench/new_families.py measure WORK --infopt target/debug/infopt \
        [--only SUBSTR,..] [--markdown bench/results/new_families.md --label after]

`export` writes WORK/NAME.onnx and WORK/zoo_meta.json (the format of bench/export_zoo.py, so
bench/zoo_check.py can run over WORK too) and WORK/export_log.json (which exported, which did not,
and why). Random weights: the measure is node counts and verification, not accuracy. Nothing is
downloaded (weights=None; transformers models from small configs).

`measure` runs, per model, in separate processes:
  * `infopt optimize MODEL -o OUT --json` (the default command: default pipeline, verification on,
    ONNX Runtime found through ORT_DYLIB_PATH): exit code, whether it verified, top-level nodes;
  * `python -m onnxsim MODEL OUT` and `python -m onnxslim MODEL OUT`: top-level nodes;
  * infopt's output against the original in ONNX Runtime at the export shapes (max |diff|),
    a check independent of infopt's own verification.
It writes WORK/measure_LABEL.json, prints a table and, with --markdown, replaces the section for
LABEL in that file (so "before" and "after" tables live side by side).
"""
import argparse
import json
import os
import subprocess
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
warnings.filterwarnings("ignore")

TS, DYNAMO = "torchscript", "dynamo"


# ----------------------------------------------------------------------------
# Model builders
# ----------------------------------------------------------------------------
def tv(name, **kw):
    from export_zoo import tv as _tv
    return _tv(name, **kw)


def image(shape, dyn, name="input"):
    return {"inputs": {name: {"shape": list(shape), "dtype": "float32"}}, "dynamic_axes": {name: dyn}}


class DecoderWithPast:
    """A transformers causal LM called as Optimum exports it: input_ids, attention_mask (past + new
    tokens), position_ids, past_key_values.{i}.key/value in; logits and present.{i}.key/value out."""

    @staticmethod
    def build(cfg_name, model_name, cfg_kw):
        import torch
        import transformers

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                cfg = getattr(transformers, cfg_name)(**cfg_kw)
                cfg._attn_implementation = "eager"
                self.m = getattr(transformers, model_name)(cfg).eval()
                self.layers = cfg.num_hidden_layers

            def forward(self, input_ids, attention_mask, position_ids, *past):
                from transformers import DynamicCache
                cache = DynamicCache()
                for i in range(self.layers):
                    cache.update(past[2 * i], past[2 * i + 1], i)
                out = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
                pkv = out.past_key_values
                presents = []
                for i in range(self.layers):
                    layer = pkv.layers[i] if hasattr(pkv, "layers") else None
                    k, v = (layer.keys, layer.values) if layer is not None else pkv[i]
                    presents += [k, v]
                return (out.logits, *presents)
        return Wrap

    @staticmethod
    def spec(name, cfg_name, model_name, cfg_kw, layers, kv_heads, head_dim, vocab, opset):
        inputs = {"input_ids": {"shape": [2, 3], "dtype": "int64", "range": [0, vocab]},
                  "attention_mask": {"shape": [2, 7], "dtype": "int64", "range": [1, 2]},
                  "position_ids": {"shape": [2, 3], "dtype": "int64", "range": [4, 5]}}
        dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"},
               "attention_mask": {0: "batch_size", 1: "past_sequence_length + sequence_length"},
               "position_ids": {0: "batch_size", 1: "sequence_length"}}
        outs, out_axes = ["logits"], {"logits": {0: "batch_size", 1: "sequence_length"}}
        for i in range(layers):
            for kv in ("key", "value"):
                n = f"past_key_values.{i}.{kv}"
                inputs[n] = {"shape": [2, kv_heads, 4, head_dim], "dtype": "float32"}
                dyn[n] = {0: "batch_size", 2: "past_sequence_length"}
                o = f"present.{i}.{kv}"
                outs.append(o)
                out_axes[o] = {0: "batch_size", 2: "past_sequence_length + sequence_length"}
        return dict(name=name, build=DecoderWithPast.build(cfg_name, model_name, cfg_kw), opset=opset,
                    exporter=TS, inputs=inputs, dynamic_axes=dyn, outputs=outs, output_axes=out_axes)


def seq2seq_encoder(cfg_name, model_name, cfg_kw, feature):
    """The encoder of an encoder-decoder model: input_ids/attention_mask (text) or input_features (speech)."""
    def build():
        import torch
        import transformers

        class Enc(torch.nn.Module):
            def __init__(self):
                super().__init__()
                cfg = getattr(transformers, cfg_name)(**cfg_kw)
                cfg._attn_implementation = "eager"
                self.enc = getattr(transformers, model_name)(cfg).eval().get_encoder()

            def forward(self, *args):
                if feature == "text":
                    return self.enc(input_ids=args[0], attention_mask=args[1]).last_hidden_state
                return self.enc(input_features=args[0]).last_hidden_state
        return Enc()
    return build


def seq2seq_decoder_with_past(cfg_name, model_name, cfg_kw, layers):
    """One decoder step of an encoder-decoder model with self-attention past (Optimum's
    decoder_with_past_model: the cross-attention keys/values come in as past too)."""
    def build():
        import torch
        import transformers

        class Dec(torch.nn.Module):
            def __init__(self):
                super().__init__()
                cfg = getattr(transformers, cfg_name)(**cfg_kw)
                cfg._attn_implementation = "eager"
                self.m = getattr(transformers, model_name)(cfg).eval()

            def forward(self, input_ids, encoder_hidden_states, encoder_attention_mask, *past):
                from transformers import DynamicCache, EncoderDecoderCache
                self_c, cross_c = DynamicCache(), DynamicCache()
                for i in range(layers):
                    self_c.update(past[4 * i], past[4 * i + 1], i)
                    cross_c.update(past[4 * i + 2], past[4 * i + 3], i)
                cache = EncoderDecoderCache(self_c, cross_c)
                out = self.m(decoder_input_ids=input_ids, encoder_outputs=(encoder_hidden_states,),
                             attention_mask=encoder_attention_mask, past_key_values=cache, use_cache=True)
                sc = out.past_key_values.self_attention_cache
                presents = []
                for i in range(layers):
                    lay = sc.layers[i]
                    presents += [lay.keys, lay.values]
                return (out.logits, *presents)
        return Dec()
    return build


def seq2seq_decoder_spec(name, cfg_name, model_name, cfg_kw, layers, heads, head_dim, d_model, vocab, opset):
    inputs = {"input_ids": {"shape": [2, 1], "dtype": "int64", "range": [0, vocab]},
              "encoder_hidden_states": {"shape": [2, 5, d_model], "dtype": "float32"},
              "encoder_attention_mask": {"shape": [2, 5], "dtype": "int64", "range": [1, 2]}}
    dyn = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
           "encoder_hidden_states": {0: "batch_size", 1: "encoder_sequence_length"},
           "encoder_attention_mask": {0: "batch_size", 1: "encoder_sequence_length"}}
    outs, out_axes = ["logits"], {"logits": {0: "batch_size", 1: "decoder_sequence_length"}}
    for i in range(layers):
        for part, seq in (("decoder", "past_decoder_sequence_length"), ("encoder", "encoder_sequence_length_out")):
            for kv in ("key", "value"):
                n = f"past_key_values.{i}.{part}.{kv}"
                inputs[n] = {"shape": [2, heads, 4 if part == "decoder" else 5, head_dim], "dtype": "float32"}
                dyn[n] = {0: "batch_size", 2: seq if part == "decoder" else "encoder_sequence_length"}
        for kv in ("key", "value"):
            o = f"present.{i}.decoder.{kv}"
            outs.append(o)
            out_axes[o] = {0: "batch_size", 2: "past_decoder_sequence_length + 1"}
    return dict(name=name, build=seq2seq_decoder_with_past(cfg_name, model_name, cfg_kw, layers), opset=opset,
                exporter=TS, inputs=inputs, dynamic_axes=dyn, outputs=outs, output_axes=out_axes)


def hf_plain(cfg_name, model_name, cfg_kw):
    """A transformers model without a cache; export_zoo.export_one wraps it by the spec's `names`."""
    def build():
        import transformers
        cfg = getattr(transformers, cfg_name)(**cfg_kw)
        cfg._attn_implementation = "eager"
        return getattr(transformers, model_name)(cfg)
    return build


def detection(name, **kw):
    def build():
        from export_zoo import SSDWrap
        return SSDWrap(tv(name, **kw))
    return build


def frcnn_small():
    from export_zoo import SSDWrap
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    m = tv("fasterrcnn_mobilenet_v3_large_320_fpn", weights_backbone=None, num_classes=8)
    m.roi_heads.box_head = TwoMLPHead(256 * 7 * 7, 128)   # the stock 1024-wide head alone is 51 MB
    m.roi_heads.box_predictor = FastRCNNPredictor(128, 8)
    return SSDWrap(m)


def specs():
    S = []
    big = dict(max_mb=200)
    # window attention (shifted windows: Pad, Roll, window partition/reverse with a dynamic batch)
    S.append(dict(name="swin_t_op17", build=lambda: tv("swin_t"), opset=17, exporter=TS, outputs=["logits"],
                  **image((1, 3, 224, 224), {0: "batch"}), **big))
    S.append(dict(name="swin_v2_t_op17", build=lambda: tv("swin_v2_t"), opset=17, exporter=TS, outputs=["logits"],
                  **image((1, 3, 256, 256), {0: "batch"}), **big))
    S.append(dict(name="maxvit_t_op17", build=lambda: tv("maxvit_t"), opset=17, exporter=TS, outputs=["logits"],
                  **image((1, 3, 224, 224), {0: "batch"}), **big))
    # channels-last LayerNorm (ConvNeXt permutes to NHWC around LayerNorm), SE blocks
    S.append(dict(name="convnext_tiny_op17", build=lambda: tv("convnext_tiny"), opset=17, exporter=TS,
                  outputs=["logits"], **image((1, 3, 224, 224), {0: "batch"}), **big))
    S.append(dict(name="regnet_y_400mf_se_op13", build=lambda: tv("regnet_y_400mf"), opset=13, exporter=TS,
                  outputs=["logits"], **image((1, 3, 224, 224), {0: "batch"})))
    S.append(dict(name="mobilenet_v3_large_se_hw_op15", build=lambda: tv("mobilenet_v3_large"), opset=15, exporter=TS,
                  outputs=["logits"], **image((1, 3, 224, 224), {0: "batch", 2: "height", 3: "width"})))
    # dynamo exports (opset 18)
    S.append(dict(name="mobilenet_v3_large_dynamo_op18", build=lambda: tv("mobilenet_v3_large"), opset=18,
                  exporter=DYNAMO, outputs=["logits"], **image((2, 3, 224, 224), {0: "batch"})))
    S.append(dict(name="convnext_tiny_dynamo_op18", build=lambda: tv("convnext_tiny"), opset=18,
                  exporter=DYNAMO, outputs=["logits"], **image((2, 3, 224, 224), {0: "batch"}), **big))
    llama_kw = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                    intermediate_size=128, vocab_size=1000, max_position_embeddings=256)
    from export_zoo import text_spec
    S.append(dict(name="llama_dynamo_op18", build=hf_plain("LlamaConfig", "LlamaForCausalLM",
                                                           dict(llama_kw, use_cache=False)),
                  names=["input_ids", "attention_mask"], opset=18, exporter=DYNAMO, outputs=["logits"],
                  **text_spec(["input_ids", "attention_mask"], 1000)))
    S.append(dict(name="swin_t_dynamo_op18", build=lambda: tv("swin_t"), opset=18, exporter=DYNAMO,
                  outputs=["logits"], **image((2, 3, 224, 224), {0: "batch"}), **big))
    # decoders with a KV cache and position_ids, as Optimum exports them
    S.append(DecoderWithPast.spec("gpt2_with_past_op14", "GPT2Config", "GPT2LMHeadModel",
                                  dict(n_layer=2, n_embd=64, n_head=2, n_inner=128, vocab_size=1000,
                                       n_positions=256), 2, 2, 32, 1000, 14))
    S.append(DecoderWithPast.spec("llama_gqa_with_past_op17", "LlamaConfig", "LlamaForCausalLM", llama_kw,
                                  2, 2, 16, 1000, 17))
    S.append(DecoderWithPast.spec("qwen2_with_past_op17", "Qwen2Config", "Qwen2ForCausalLM",
                                  dict(llama_kw, tie_word_embeddings=True), 2, 2, 16, 1000, 17))
    # encoder-decoder: encoder and decoder-with-past
    t5_kw = dict(num_layers=2, num_decoder_layers=2, d_model=64, d_kv=16, num_heads=4, d_ff=128,
                 vocab_size=1000, decoder_start_token_id=0)
    S.append(dict(name="t5_encoder_op17", build=seq2seq_encoder("T5Config", "T5ForConditionalGeneration", t5_kw,
                                                                "text"),
                  opset=17, exporter=TS, outputs=["last_hidden_state"],
                  output_axes={"last_hidden_state": {0: "batch", 1: "seq"}},
                  **text_spec(["input_ids", "attention_mask"], 1000)))
    S.append(seq2seq_decoder_spec("t5_decoder_with_past_op17", "T5Config", "T5ForConditionalGeneration", t5_kw,
                                  2, 4, 16, 64, 1000, 17))
    bart_kw = dict(encoder_layers=2, decoder_layers=2, d_model=64, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000,
                   max_position_embeddings=128)
    S.append(seq2seq_decoder_spec("bart_decoder_with_past_op14", "BartConfig", "BartForConditionalGeneration",
                                  bart_kw, 2, 4, 16, 64, 1000, 14))
    whisper_kw = dict(encoder_layers=2, decoder_layers=2, d_model=64, encoder_attention_heads=4,
                      decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000,
                      num_mel_bins=80, max_source_positions=50, max_target_positions=64, pad_token_id=0,
                      bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    S.append(dict(name="whisper_encoder_op17", build=seq2seq_encoder("WhisperConfig",
                                                                     "WhisperForConditionalGeneration",
                                                                     whisper_kw, "speech"),
                  opset=17, exporter=TS, outputs=["last_hidden_state"],
                  inputs={"input_features": {"shape": [2, 80, 100], "dtype": "float32"}},
                  dynamic_axes={"input_features": {0: "batch"}},
                  output_axes={"last_hidden_state": {0: "batch"}}))
    S.append(seq2seq_decoder_spec("whisper_decoder_with_past_op17", "WhisperConfig",
                                  "WhisperForConditionalGeneration", whisper_kw, 2, 4, 16, 64, 1000, 17))
    # detection with NMS (and RoiAlign)
    S.append(dict(name="ssdlite320_static_op17", build=detection("ssdlite320_mobilenet_v3_large",
                                                                  weights_backbone=None, num_classes=91),
                  opset=17, exporter=TS, outputs=["boxes", "scores", "labels"],
                  output_axes={"boxes": {0: "n"}, "scores": {0: "n"}, "labels": {0: "n"}},
                  **image((1, 3, 320, 320), {})))
    S.append(dict(name="fasterrcnn_mbv3_320_op16", build=frcnn_small, opset=16, exporter=TS,
                  outputs=["boxes", "scores", "labels"],
                  output_axes={"boxes": {0: "n"}, "scores": {0: "n"}, "labels": {0: "n"}},
                  **image((1, 3, 320, 320), {2: "height", 3: "width"})))
    # window attention with dynamic H and W: the alignment Pad and the window counts stay symbolic
    S.append(dict(name="swin_t_hw_op17", build=lambda: tv("swin_t"), opset=17, exporter=TS, outputs=["logits"],
                  **image((1, 3, 224, 224), {0: "batch", 2: "height", 3: "width"}), **big))
    # a decoder with past through the dynamo exporter (torch.export infers the relations between dims)
    llama_past = DecoderWithPast.spec("llama_gqa_with_past_dynamo_op18", "LlamaConfig", "LlamaForCausalLM",
                                      llama_kw, 2, 2, 16, 1000, 18)
    S.append(dict(llama_past, exporter=DYNAMO, auto_dims=True))
    # TorchScript export with modules as local functions (each BasicBlock a FunctionProto)
    S.append(dict(name="resnet10_functions_op17", build=lambda: __import__("export_zoo").resnet10(), opset=17,
                  exporter=TS, outputs=["logits"], functions="BasicBlock",
                  **image((1, 3, 64, 64), {0: "batch"})))
    return S


def export_special(spec, work):
    """What export_zoo.export_one does not cover: modules as local functions, and dynamo with
    Dim.AUTO for every dynamic axis (decoders whose mask length is past + new tokens)."""
    import onnx
    import torch
    from export_zoo import make_inputs
    path = os.path.join(work, spec["name"] + ".onnx")
    torch.manual_seed(0)
    model = spec["build"]()
    model = model().eval() if isinstance(model, type) else model.eval()
    args = make_inputs(spec)
    names = list(spec["inputs"])
    with torch.no_grad():
        model(*args)
        if spec.get("functions"):
            import torchvision.models.resnet as r
            torch.onnx.export(model, args, path, opset_version=spec["opset"], input_names=names,
                              output_names=spec["outputs"], dynamic_axes=spec["dynamic_axes"],
                              export_modules_as_functions={getattr(r, spec["functions"])}, dynamo=False)
        else:
            from torch.export import Dim
            dims = [{ax: Dim.AUTO for ax in spec["dynamic_axes"].get(n, {})} for n in names]
            fixed, rest = dims[:3], dims[3:]
            prog = torch.onnx.export(model, args, dynamo=True, opset_version=spec["opset"], input_names=names,
                                     output_names=spec["outputs"], dynamic_shapes=(*fixed, tuple(rest)),
                                     external_data=False, optimize=True)
            prog.save(path, external_data=False)
    m = onnx.load(path)
    opset = {o.domain: o.version for o in m.opset_import}.get("")
    return path, m, opset, os.path.getsize(path) / 2**20


# ----------------------------------------------------------------------------
# Exporters other than torch
# ----------------------------------------------------------------------------
def sklearn_models(work):
    """scikit-learn pipelines through skl2onnx: scaler + PCA + logistic regression, and a
    random forest (ai.onnx.ml TreeEnsemble) behind an imputer."""
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.decomposition import PCA
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 12)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    made = []
    for name, pipe, target, opts in (
        ("skl_scaler_pca_logreg", make_pipeline(StandardScaler(), PCA(6), LogisticRegression()), y,
         {"zipmap": False}),
        ("skl_imputer_forest", make_pipeline(SimpleImputer(), RandomForestClassifier(8, max_depth=4)), y,
         {"zipmap": False}),
        ("skl_scaler_mlp_regressor", make_pipeline(StandardScaler(), MLPRegressor(hidden_layer_sizes=(16, 16), max_iter=50)),
         x[:, 0] * 2.0, None),
    ):
        pipe.fit(x, target)
        options = {id(pipe.steps[-1][1]): opts} if opts else None
        onx = to_onnx(pipe, x[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options=options)
        # a dynamic batch named like the torch exports
        onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
        path = os.path.join(work, name + ".onnx")
        with open(path, "wb") as f:
            f.write(onx.SerializeToString())
        made.append((name, {"file": name + ".onnx", "exporter": "skl2onnx", "opset": 17,
                            "inputs": {onx.graph.input[0].name: {"shape": [4, 12], "dtype": "float32"}},
                            "dynamic_axes": {onx.graph.input[0].name: {"0": "batch"}},
                            "outputs": [o.name for o in onx.graph.output]}))
    return made


def export(work, only):
    import onnx
    from export_zoo import export_one
    os.makedirs(work, exist_ok=True)
    meta_path = os.path.join(work, "zoo_meta.json")
    log_path = os.path.join(work, "export_log.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    log = json.load(open(log_path)) if os.path.exists(log_path) else {}
    for spec in specs():
        if only and not any(o in spec["name"] for o in only):
            continue
        t = time.time()
        try:
            special = spec.get("functions") or spec.get("auto_dims")
            path, m, opset, mb = export_special(spec, work) if special else export_one(spec, work)
            log[spec["name"]] = {"ok": True, "nodes": len(m.graph.node), "opset": opset, "mb": round(mb, 2),
                                 "functions": len(m.functions), "exporter": spec["exporter"]}
            meta[spec["name"]] = {
                "file": os.path.basename(path), "exporter": spec["exporter"], "opset": opset,
                "inputs": spec["inputs"],
                "dynamic_axes": {k: {str(ax): s for ax, s in v.items()} for k, v in spec["dynamic_axes"].items()},
                "outputs": spec["outputs"]}
            print(f"{spec['name']:<34} {spec['exporter']:<11} op{opset:<3} {len(m.graph.node):>5} nodes "
                  f"{mb:>7.1f} MB {len(m.functions)} functions {time.time() - t:>6.1f} s", flush=True)
        except Exception as e:  # noqa: BLE001 - record and go on
            msg = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"[:300]
            log[spec["name"]] = {"ok": False, "error": msg, "exporter": spec["exporter"]}
            print(f"{spec['name']:<34} EXPORT FAILED: {msg}", flush=True)
            if os.environ.get("ZOO_TRACEBACK"):
                traceback.print_exc()
    if not only or any("skl" in o for o in only):
        try:
            for name, m in sklearn_models(work):
                meta[name] = m
                n = len(onnx.load(os.path.join(work, m["file"])).graph.node)
                log[name] = {"ok": True, "nodes": n, "opset": 17, "exporter": "skl2onnx", "functions": 0}
                print(f"{name:<34} skl2onnx    op17 {n:>5} nodes", flush=True)
        except Exception as e:  # noqa: BLE001
            log["sklearn"] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300], "exporter": "skl2onnx"}
            print(f"sklearn EXPORT FAILED: {e}", flush=True)
    json.dump(meta, open(meta_path, "w"), indent=1)
    json.dump(log, open(log_path, "w"), indent=1)


# ----------------------------------------------------------------------------
# Measure
# ----------------------------------------------------------------------------
def nodes(path):
    import onnx
    try:
        return len(onnx.load(path, load_external_data=False).graph.node)
    except Exception:  # noqa: BLE001
        return None


def run(cmd, timeout):
    t = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        return p.returncode, time.time() - t, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", time.time() - t, "", ""


def last_line(s):
    lines = [x.strip() for x in (s or "").strip().splitlines() if x.strip()]
    return lines[-1] if lines else ""


def ort_diff(src, out, meta):
    """Max |diff| of infopt's output against the original in ONNX Runtime (no graph optimizations,
    so ORT's own rewrites judge nothing) at the export shapes."""
    import numpy as np
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    a = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(out, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in a.get_inputs():
        spec = meta["inputs"].get(i.name, {})
        shape = spec.get("shape") or [d if isinstance(d, int) else 2 for d in i.shape]
        if "float" in i.type:
            feeds[i.name] = rng.random(shape, dtype=np.float32)
        else:
            lo, hi = spec.get("range", [0, 2])
            feeds[i.name] = rng.integers(lo, hi, size=shape).astype(np.int32 if "int32" in i.type else np.int64)
    ra, rb = a.run(None, feeds), b.run(None, feeds)
    worst = 0.0
    for x, y in zip(ra, rb):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return f"shape {x.shape} vs {y.shape}"
        if x.size:
            worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))))
    return f"{worst:.1e}"


def measure_one(name, src, meta, infopt, timeout, peers):
    outd = os.path.join(os.path.dirname(src), "out")
    os.makedirs(outd, exist_ok=True)
    r = {"model": name, "exporter": meta.get("exporter"), "opset": meta.get("opset"), "input": nodes(src)}
    out = os.path.join(outd, name + ".infopt.onnx")
    if os.path.exists(out):
        os.remove(out)
    rc, secs, stdout, stderr = run([infopt, "optimize", src, "-o", out, "--json"], timeout)
    r.update(rc=rc, secs=round(secs, 1), error=last_line(stderr) if rc != 0 else "")
    try:
        rep = json.loads(stdout)
        v = rep.get("verification") or {}
        r["verified"] = v.get("passed") is True and rc == 0
        r["backend"] = (v.get("backend") or {}).get("name")
    except Exception:  # noqa: BLE001
        r["verified"] = None
    r["infopt"] = nodes(out) if rc == 0 and os.path.exists(out) else None
    if r["infopt"] is not None:
        try:
            r["ort_diff"] = ort_diff(src, out, meta)
        except Exception as e:  # noqa: BLE001
            r["ort_diff"] = f"ORT: {str(e).splitlines()[0][:60]}"
    for tool in peers:
        dst = os.path.join(outd, f"{name}.{tool}.onnx")
        if os.path.exists(dst):
            os.remove(dst)
        prc, _, _, perr = run([sys.executable, "-m", tool, src, dst], timeout)
        r[tool] = nodes(dst) if prc == 0 and os.path.exists(dst) else None
        if r[tool] is None:
            r[tool + "_error"] = last_line(perr)[:120]
    return r


def table(rows):
    head = ("| model | exporter | input | infopt exit | verified | infopt | onnxsim | onnxslim | "
            "best peer | gap | ORT max\\|diff\\| |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        peers = [r.get(t) for t in ("onnxsim", "onnxslim") if r.get(t) is not None]
        best = min(peers) if peers else None
        gap = (r["infopt"] - best) if r.get("infopt") is not None and best is not None else None
        fail = f" ({r['error'][:90]})" if r.get("error") else ""
        lines.append(
            f"| {r['model']} | {r.get('exporter')} | {r.get('input')} | {r['rc']}{fail} | "
            f"{'yes' if r.get('verified') else 'no'} | {r.get('infopt', '-')} | "
            f"{r.get('onnxsim') if r.get('onnxsim') is not None else 'failed'} | "
            f"{r.get('onnxslim') if r.get('onnxslim') is not None else 'failed'} | {best} | "
            f"{'' if gap is None else ('+' if gap > 0 else '') + str(gap)} | {r.get('ort_diff', '-')} |")
    return head + "\n".join(lines) + "\n"


def measure(work, infopt, only, label, markdown, timeout, peers):
    meta = json.load(open(os.path.join(work, "zoo_meta.json")))
    rows = []
    for name, m in meta.items():
        if only and not any(o in name for o in only):
            continue
        r = measure_one(name, os.path.join(work, m["file"]), m, infopt, timeout, peers)
        rows.append(r)
        print(json.dumps(r), flush=True)
    json.dump(rows, open(os.path.join(work, f"measure_{label}.json"), "w"), indent=1)
    t = table(rows)
    print(t)
    if markdown:
        text = open(markdown).read() if os.path.exists(markdown) else ""
        start, end = f"<!-- {label} -->", f"<!-- /{label} -->"
        block = f"{start}\n{t}{end}"
        if start in text:
            text = text[:text.index(start)] + block + text[text.index(end) + len(end):]
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        open(markdown, "w").write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["export", "measure"])
    ap.add_argument("work")
    ap.add_argument("--only", default=None, help="comma-separated substrings of model names")
    ap.add_argument("--infopt", default=os.path.join(HERE, "..", "target", "debug", "infopt"))
    ap.add_argument("--label", default="run")
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--no-peers", action="store_true")
    a = ap.parse_args()
    only = a.only.split(",") if a.only else None
    if a.step == "export":
        export(a.work, only)
    else:
        measure(a.work, a.infopt, only, a.label, a.markdown, a.timeout,
                [] if a.no_peers else ["onnxsim", "onnxslim"])


if __name__ == "__main__":
    main()
