"""More model families for issue 19 (helper s8): exported into WORK (default /tmp/nf2) in the format
of bench/new_families.py, so its `measure` step runs over them unchanged.

    PY=/work/venvs/zoo/bin/python
    nice -n 10 $PY bench/new_families2.py export /tmp/nf2 [--only SUBSTR,..]
    ORT_DYLIB_PATH=... nice -n 10 $PY bench/new_families.py measure /tmp/nf2 --infopt /tmp/fam-infopt --label s8

Random weights, small configs, nothing downloaded.
"""
import argparse
import json
import os
import sys
import time
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")

import new_families as nf  # noqa: E402
from new_families import TS, DYNAMO, DecoderWithPast, seq2seq_decoder_spec, seq2seq_encoder, image  # noqa: E402

DEC = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128,
           vocab_size=1000, max_position_embeddings=256)


# ----------------------------------------------------------------------------
def hf_vision(cfg_name, model_name, cfg_kw, out="logits"):
    """A transformers vision/audio model called with one tensor input, returning one tensor."""
    def build():
        import torch
        import transformers

        class W(torch.nn.Module):
            def __init__(self):
                super().__init__()
                cfg = getattr(transformers, cfg_name)(**cfg_kw)
                try:
                    cfg._attn_implementation = "eager"
                except Exception:  # noqa: BLE001
                    pass
                self.m = getattr(transformers, model_name)(cfg).eval()

            def forward(self, x):
                o = self.m(x)
                return getattr(o, out)
        return W()
    return build


def detection_small(kind):
    """torchvision RetinaNet / FCOS / Keypoint R-CNN on a ResNet-18 FPN backbone at 320x320."""
    def build():
        import torchvision
        from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
        from torchvision.ops.feature_pyramid_network import LastLevelP6P7
        from export_zoo import SSDWrap
        det = torchvision.models.detection
        if kind in ("retinanet", "fcos"):
            bb = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5,
                                     returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
            cls = det.RetinaNet if kind == "retinanet" else det.FCOS
            kw = dict(min_size=320, max_size=320)
            if kind == "retinanet":
                m = cls(bb, num_classes=8, **kw)
            else:
                m = cls(bb, num_classes=8, **kw)
            return SSDWrap(m)
        from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
        if kind == "mask":
            bb = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5)
            m = det.MaskRCNN(bb, num_classes=3, min_size=320, max_size=320)
            m.roi_heads.box_head = TwoMLPHead(256 * 7 * 7, 128)
            m.roi_heads.box_predictor = FastRCNNPredictor(128, 3)
            import torch

            class MW(torch.nn.Module):
                def __init__(self, m):
                    super().__init__()
                    self.m = m

                def forward(self, x):
                    o = self.m([x[0]])[0]
                    return o["boxes"], o["scores"], o["labels"], o["masks"]
            return MW(m)
        # keypoint R-CNN
        from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
        bb = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=5)
        m = det.KeypointRCNN(bb, num_classes=2, num_keypoints=5, min_size=320, max_size=320)
        m.roi_heads.box_head = TwoMLPHead(256 * 7 * 7, 128)
        m.roi_heads.box_predictor = FastRCNNPredictor(128, 2)

        import torch

        class KW(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                o = self.m([x[0]])[0]
                return o["boxes"], o["scores"], o["labels"], o["keypoints"]
        return KW(m)
    return build


def onnxscript_functions(work):
    """Nested model-local functions (pkg.local: Norm, Gelu, Block calling both, with a Shape-driven
    Reshape inside), the layout a dynamo export keeps when its functions are not inlined.
    Built with onnx.helper (onnxscript's @script needs module-level names)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper as h, numpy_helper as nh
    D = "pkg.local"
    ops = [h.make_opsetid("", 18), h.make_opsetid(D, 1)]
    c = lambda name, arr: h.make_node("Constant", [], [name], value=nh.from_array(np.asarray(arr), name))
    norm = h.make_function(D, "Norm", ["x"], ["y"], [
        c("ax", np.array([-1], np.int64)),
        h.make_node("ReduceMean", ["x", "ax"], ["m"], keepdims=1),
        h.make_node("Sub", ["x", "m"], ["d"]),
        h.make_node("Mul", ["d", "d"], ["d2"]),
        h.make_node("ReduceMean", ["d2", "ax"], ["v"], keepdims=1),
        c("eps", np.array(1e-5, np.float32)),
        h.make_node("Add", ["v", "eps"], ["ve"]),
        h.make_node("Sqrt", ["ve"], ["s"]),
        h.make_node("Div", ["d", "s"], ["y"])], ops)
    gelu = h.make_function(D, "Gelu", ["x"], ["y"], [
        c("half", np.array(0.5, np.float32)), c("one", np.array(1.0, np.float32)),
        c("r2", np.array(1.4142135, np.float32)),
        h.make_node("Div", ["x", "r2"], ["a"]), h.make_node("Erf", ["a"], ["e"]),
        h.make_node("Add", ["one", "e"], ["b"]), h.make_node("Mul", ["x", "half"], ["xh"]),
        h.make_node("Mul", ["xh", "b"], ["y"])], ops)
    block = h.make_function(D, "Block", ["x", "w1", "w2"], ["y"], [
        h.make_node("Norm", ["x"], ["n"], domain=D),
        h.make_node("Shape", ["n"], ["s"]),
        c("m1", np.array([-1], np.int64)), c("big", np.array([2**62], np.int64)),
        h.make_node("Slice", ["s", "m1", "big"], ["last"]),
        h.make_node("Concat", ["m1", "last"], ["shp"], axis=0),
        h.make_node("Reshape", ["n", "shp"], ["n2"]),
        h.make_node("MatMul", ["n2", "w1"], ["h1"]),
        h.make_node("Gelu", ["h1"], ["g"], domain=D),
        h.make_node("MatMul", ["g", "w2"], ["h2"]),
        h.make_node("Reshape", ["h2", "s"], ["h3"]),
        h.make_node("Add", ["x", "h3"], ["y"])], ops)
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.standard_normal((32, 64)).astype(np.float32) * 0.1, "w1"),
             nh.from_array(rng.standard_normal((64, 32)).astype(np.float32) * 0.1, "w2")]
    g = h.make_graph([
        h.make_node("Block", ["x", "w1", "w2"], ["y1"], domain=D, name="block0"),
        h.make_node("Block", ["y1", "w1", "w2"], ["y2"], domain=D, name="block1"),
        h.make_node("Norm", ["y2"], ["out"], domain=D, name="final_norm")], "main",
        [h.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 32])],
        [h.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "seq", 32])], inits)
    m = h.make_model(g, opset_imports=ops, functions=[norm, gelu, block], ir_version=8)
    onnx.checker.check_model(m)
    name = "onnxscript_local_functions_op18"
    path = os.path.join(work, name + ".onnx")
    onnx.save(m, path)
    return name, path, m


def dynamo_unoptimized(work):
    """A dynamo export with optimize=False (the brief: try to keep local functions)."""
    import onnx
    import torch

    class Blk(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(32)
            self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)

        def forward(self, x):
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.b = torch.nn.Sequential(Blk(), Blk())

        def forward(self, x):
            return self.b(x)
    torch.manual_seed(0)
    from torch.export import Dim
    x = torch.rand(2, 5, 32)
    name = "mlp_blocks_dynamo_noopt_op18"
    path = os.path.join(work, name + ".onnx")
    prog = torch.onnx.export(M().eval(), (x,), dynamo=True, opset_version=18, input_names=["x"],
                             output_names=["out"], dynamic_shapes=({0: Dim("batch"), 1: Dim("seq")},),
                             optimize=False, external_data=False)
    prog.save(path, external_data=False)
    return name, path, onnx.load(path)


def seg(name, **kw):
    import torchvision.models.segmentation as S
    return getattr(S, name)(weights=None, **kw)


def SegWrap(m):
    import torch

    class W(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)["out"]
    return W()


def unet_tiny():
    import torch
    from diffusers import UNet2DConditionModel
    u = UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                             block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                             up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                             attention_head_dim=8, norm_num_groups=8)
    u.set_default_attn_processor()

    class W(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.u = u

        def forward(self, sample, timestep, ehs):
            return self.u(sample, timestep, encoder_hidden_states=ehs).sample
    return W()


def vae_decoder_tiny():
    import torch
    from diffusers import AutoencoderKL
    v = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
                      up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"), block_out_channels=(32, 64),
                      latent_channels=4, norm_num_groups=8, layers_per_block=1)
    v.set_default_attn_processor()

    class W(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.v = v

        def forward(self, z):
            return self.v.decode(z).sample
    return W()


def specs():
    S = []
    big = dict(max_mb=200)
    # ---------------- decoders with past (Optimum-style) ----------------
    mistral_kw = dict(DEC, num_key_value_heads=2, sliding_window=5)
    S.append(DecoderWithPast.spec("mistral_sw_with_past_op17", "MistralConfig", "MistralForCausalLM",
                                  mistral_kw, 2, 2, 16, 1000, 17))
    phi3_kw = dict(DEC, num_key_value_heads=4, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    S.append(DecoderWithPast.spec("phi3_with_past_op17", "Phi3Config", "Phi3ForCausalLM", phi3_kw,
                                  2, 4, 16, 1000, 17))
    phi_kw = dict(DEC, partial_rotary_factor=0.5)
    S.append(DecoderWithPast.spec("phi_partial_rotary_with_past_op17", "PhiConfig", "PhiForCausalLM", phi_kw,
                                  2, 4, 16, 1000, 17))
    neox_kw = dict(DEC, rotary_pct=0.25)
    S.append(DecoderWithPast.spec("gpt_neox_with_past_op17", "GPTNeoXConfig", "GPTNeoXForCausalLM", neox_kw,
                                  2, 4, 16, 1000, 17))
    falcon_kw = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=1000,
                     new_decoder_architecture=False, multi_query=True, alibi=False, parallel_attn=True)
    S.append(DecoderWithPast.spec("falcon_mqa_with_past_op17", "FalconConfig", "FalconForCausalLM", falcon_kw,
                                  2, 1, 16, 1000, 17))
    gemma_kw = dict(DEC, num_key_value_heads=1, head_dim=16)
    S.append(DecoderWithPast.spec("gemma_mqa_with_past_op17", "GemmaConfig", "GemmaForCausalLM", gemma_kw,
                                  2, 1, 16, 1000, 17))
    opt_kw = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, ffn_dim=128, vocab_size=1000,
                  max_position_embeddings=256, word_embed_proj_dim=64)
    S.append(DecoderWithPast.spec("opt_with_past_op14", "OPTConfig", "OPTForCausalLM", opt_kw,
                                  2, 4, 16, 1000, 14))
    bloom_kw = dict(n_layer=2, hidden_size=64, n_head=4, vocab_size=1000)
    S.append(DecoderWithPast.spec("bloom_alibi_with_past_op14", "BloomConfig", "BloomForCausalLM", bloom_kw,
                                  2, 4, 16, 1000, 14))
    gptj_kw = dict(n_layer=2, n_embd=64, n_head=4, rotary_dim=8, vocab_size=1000, n_positions=256)
    S.append(DecoderWithPast.spec("gptj_with_past_op17", "GPTJConfig", "GPTJForCausalLM", gptj_kw,
                                  2, 4, 16, 1000, 17))
    # dynamo (opset 18) decoders with past, Dim.AUTO
    for base in ("mistral_sw", "phi3", "gemma_mqa"):
        s = [x for x in S if x["name"].startswith(base)][0]
        S.append(dict(s, name=base + "_with_past_dynamo_op18", opset=18, exporter=DYNAMO, auto_dims=True))
    # ---------------- encoder-decoder ----------------
    marian_kw = dict(encoder_layers=2, decoder_layers=2, d_model=64, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000,
                     max_position_embeddings=128, pad_token_id=0, decoder_start_token_id=0)
    S.append(seq2seq_decoder_spec("marian_decoder_with_past_op17", "MarianConfig", "MarianMTModel",
                                  marian_kw, 2, 4, 16, 64, 1000, 17))
    mbart_kw = dict(marian_kw)
    S.append(seq2seq_decoder_spec("mbart_decoder_with_past_op17", "MBartConfig", "MBartForConditionalGeneration",
                                  mbart_kw, 2, 4, 16, 64, 1000, 17))
    from export_zoo import text_spec
    S.append(dict(name="pegasus_encoder_op17", build=seq2seq_encoder("PegasusConfig",
                                                                     "PegasusForConditionalGeneration",
                                                                     marian_kw, "text"),
                  opset=17, exporter=TS, outputs=["last_hidden_state"],
                  output_axes={"last_hidden_state": {0: "batch", 1: "seq"}},
                  **text_spec(["input_ids", "attention_mask"], 1000)))
    # ---------------- vision ----------------
    vit_kw = dict(image_size=32, patch_size=4, num_channels=3, hidden_size=64, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=128, num_labels=10)
    S.append(dict(name="deit_distilled_op17", build=hf_vision("DeiTConfig", "DeiTForImageClassificationWithTeacher",
                                                              vit_kw), opset=17, exporter=TS, outputs=["logits"],
                  **image((2, 3, 32, 32), {0: "batch"})))
    S.append(dict(name="beit_relpos_op17", build=hf_vision("BeitConfig", "BeitForImageClassification",
                                                           dict(vit_kw, use_relative_position_bias=True,
                                                                use_mean_pooling=True)),
                  opset=17, exporter=TS, outputs=["logits"], **image((2, 3, 32, 32), {0: "batch"})))
    seg_kw = dict(num_channels=3, num_encoder_blocks=4, depths=[1, 1, 1, 1], sr_ratios=[8, 4, 2, 1],
                  hidden_sizes=[16, 32, 48, 64], num_attention_heads=[1, 2, 2, 4], decoder_hidden_size=64,
                  num_labels=5)
    S.append(dict(name="segformer_op17", build=hf_vision("SegformerConfig", "SegformerForSemanticSegmentation",
                                                         seg_kw), opset=17, exporter=TS, outputs=["logits"],
                  output_axes={"logits": {0: "batch"}}, **image((1, 3, 64, 64), {0: "batch"})))
    S.append(dict(name="segformer_hw_op17", build=hf_vision("SegformerConfig", "SegformerForSemanticSegmentation",
                                                            seg_kw), opset=17, exporter=TS, outputs=["logits"],
                  output_axes={"logits": {0: "batch", 2: "oh", 3: "ow"}},
                  **image((1, 3, 64, 64), {0: "batch", 2: "height", 3: "width"})))
    mvit_kw = dict(num_channels=3, image_size=64, patch_size=2, hidden_sizes=[32, 48, 64],
                   neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32], num_attention_heads=2, num_labels=10)
    S.append(dict(name="mobilevit_op17", build=hf_vision("MobileViTConfig", "MobileViTForImageClassification",
                                                         mvit_kw), opset=17, exporter=TS, outputs=["logits"],
                  **image((1, 3, 64, 64), {0: "batch"})))
    cnv2_kw = dict(num_channels=3, hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 2, 1], num_labels=10)
    S.append(dict(name="convnextv2_grn_op17", build=hf_vision("ConvNextV2Config", "ConvNextV2ForImageClassification",
                                                              cnv2_kw), opset=17, exporter=TS, outputs=["logits"],
                  **image((1, 3, 64, 64), {0: "batch"})))
    swin2_kw = dict(image_size=64, patch_size=4, num_channels=3, embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                    window_size=4, num_labels=10)
    S.append(dict(name="swinv2_hf_dynamo_op18", build=hf_vision("Swinv2Config", "Swinv2ForImageClassification",
                                                                swin2_kw), opset=18, exporter=DYNAMO,
                  outputs=["logits"], **image((2, 3, 64, 64), {0: "batch"})))
    S.append(dict(name="swinv2_hf_op17", build=hf_vision("Swinv2Config", "Swinv2ForImageClassification",
                                                         swin2_kw), opset=17, exporter=TS,
                  outputs=["logits"], **image((2, 3, 64, 64), {0: "batch"})))
    yolos_kw = dict(image_size=[64, 64], patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=128, num_detection_tokens=10, num_labels=5)
    S.append(dict(name="yolos_op17", build=hf_vision("YolosConfig", "YolosForObjectDetection", yolos_kw,
                                                     out="pred_boxes"),
                  opset=17, exporter=TS, outputs=["pred_boxes"], **image((1, 3, 64, 64), {0: "batch"})))
    detr_kw = dict(use_timm_backbone=False, use_pretrained_backbone=False, backbone=None,
                   backbone_config={"model_type": "resnet", "embedding_size": 16, "hidden_sizes": [16, 32, 48, 64],
                                    "depths": [1, 1, 1, 1], "layer_type": "basic", "out_features": ["stage4"]},
                   d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_queries=10,
                   num_labels=5)
    S.append(dict(name="detr_op17", build=hf_vision("DetrConfig", "DetrForObjectDetection", detr_kw,
                                                    out="pred_boxes"),
                  opset=17, exporter=TS, outputs=["pred_boxes"], **image((1, 3, 64, 64), {0: "batch"})))
    # ---------------- speech ----------------
    w2v_kw = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                  conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                  num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, vocab_size=32)
    S.append(dict(name="wav2vec2_ctc_op17", build=hf_vision("Wav2Vec2Config", "Wav2Vec2ForCTC", w2v_kw),
                  opset=17, exporter=TS, outputs=["logits"], output_axes={"logits": {0: "batch", 1: "frames"}},
                  inputs={"input_values": {"shape": [2, 1600], "dtype": "float32"}},
                  dynamic_axes={"input_values": {0: "batch", 1: "samples"}}))
    hub_kw = dict(w2v_kw, feat_extract_norm="layer", do_stable_layer_norm=True)
    hub_kw.pop("vocab_size")
    S.append(dict(name="hubert_op17", build=hf_vision("HubertConfig", "HubertModel", hub_kw,
                                                      out="last_hidden_state"),
                  opset=17, exporter=TS, outputs=["last_hidden_state"],
                  output_axes={"last_hidden_state": {0: "batch", 1: "frames"}},
                  inputs={"input_values": {"shape": [2, 1600], "dtype": "float32"}},
                  dynamic_axes={"input_values": {0: "batch", 1: "samples"}}))
    # ---------------- detection with NMS ----------------
    outs3 = dict(outputs=["boxes", "scores", "labels"],
                 output_axes={"boxes": {0: "n"}, "scores": {0: "n"}, "labels": {0: "n"}})
    S.append(dict(name="retinanet_r18_op17", build=detection_small("retinanet"), opset=17, exporter=TS,
                  **outs3, **image((1, 3, 320, 320), {}), **big))
    S.append(dict(name="fcos_r18_op17", build=detection_small("fcos"), opset=17, exporter=TS,
                  **outs3, **image((1, 3, 320, 320), {}), **big))
    S.append(dict(name="keypointrcnn_r18_op17", build=detection_small("keypoint"), opset=17, exporter=TS,
                  outputs=["boxes", "scores", "labels", "keypoints"],
                  output_axes={"boxes": {0: "n"}, "scores": {0: "n"}, "labels": {0: "n"}, "keypoints": {0: "n"}},
                  **image((1, 3, 320, 320), {}), **big))
    # ================= round 2 =================
    # more dynamo decoders with past
    for base in ("falcon_mqa", "bloom_alibi", "opt", "gpt_neox", "phi_partial_rotary", "gptj"):
        s = [x for x in S if x["name"].startswith(base) and x["exporter"] == TS][0]
        S.append(dict(s, name=base + "_with_past_dynamo_op18", opset=18, exporter=DYNAMO, auto_dims=True))
    # fp16 decoder with past (model.half(), fp16 cache)
    s = DecoderWithPast.spec("mistral_fp16_with_past_op17", "MistralConfig", "MistralForCausalLM",
                             mistral_kw, 2, 2, 16, 1000, 17)
    for k, v in s["inputs"].items():
        if v["dtype"] == "float32":
            v["dtype"] = "float16"
    S.append(dict(s, half=True))
    # a decoder at a newer opset through dynamo (opset 23: Attention / RMSNormalization may appear)
    s = [x for x in S if x["name"] == "mistral_sw_with_past_op17"][0]
    S.append(dict(s, name="mistral_sw_with_past_dynamo_op23", opset=23, exporter=DYNAMO, auto_dims=True))
    # dynamo vision / speech
    for base, inp in (("deit_distilled", (2, 3, 32, 32)), ("segformer", (2, 3, 64, 64)), ("yolos", (2, 3, 64, 64)),
                      ("beit_relpos", (2, 3, 32, 32)), ("mobilevit", (2, 3, 64, 64))):
        s = [x for x in S if x["name"] == base + "_op17"][0]
        S.append(dict(s, name=base + "_dynamo_op18", opset=18, exporter=DYNAMO, **image(inp, {0: "batch"})))
    s = [x for x in S if x["name"] == "wav2vec2_ctc_op17"][0]
    S.append(dict(s, name="wav2vec2_ctc_dynamo_op18", opset=18, exporter=DYNAMO,
                  inputs={"input_values": {"shape": [2, 1600], "dtype": "float32"}},
                  dynamic_axes={"input_values": {0: "batch", 1: "samples"}}))
    # DINOv2: position embeddings interpolated (bicubic Resize) to a dynamic H, W
    dino_kw = dict(image_size=32, patch_size=4, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                   mlp_ratio=2, num_labels=10)
    S.append(dict(name="dinov2_hw_op17", build=hf_vision("Dinov2Config", "Dinov2ForImageClassification", dino_kw),
                  opset=17, exporter=TS, outputs=["logits"],
                  **image((1, 3, 40, 48), {0: "batch", 2: "height", 3: "width"})))
    # CLIP text (argmax pooling over input_ids) and vision towers
    clip_kw = dict(text_config=dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, max_position_embeddings=32, eos_token_id=2),
                   vision_config=dict(image_size=32, patch_size=4, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4), projection_dim=32)
    S.append(dict(name="clip_op17", build=nf.hf_plain("CLIPConfig", "CLIPModel", clip_kw),
                  names=["input_ids", "pixel_values", "attention_mask"], opset=17, exporter=TS,
                  outputs=["logits_per_image", "logits_per_text", "text_embeds", "image_embeds"],
                  inputs={"input_ids": {"shape": [2, 8], "dtype": "int64", "range": [0, 1000]},
                          "pixel_values": {"shape": [2, 3, 32, 32], "dtype": "float32"},
                          "attention_mask": {"shape": [2, 8], "dtype": "int64", "range": [1, 2]}},
                  dynamic_axes={"input_ids": {0: "text_batch", 1: "seq"}, "pixel_values": {0: "image_batch"},
                                "attention_mask": {0: "text_batch", 1: "seq"}}))
    # wav2vec2 with a padding mask (feature lengths computed from the mask)
    S.append(dict(name="wav2vec2_mask_op17",
                  build=nf.hf_plain("Wav2Vec2Config", "Wav2Vec2ForCTC", dict(w2v_kw, feat_extract_norm="layer",
                                                                             do_stable_layer_norm=True)),
                  names=["input_values", "attention_mask"], opset=17, exporter=TS, outputs=["logits"],
                  output_axes={"logits": {0: "batch", 1: "frames"}},
                  inputs={"input_values": {"shape": [2, 1600], "dtype": "float32"},
                          "attention_mask": {"shape": [2, 1600], "dtype": "int64", "range": [1, 2]}},
                  dynamic_axes={"input_values": {0: "batch", 1: "samples"},
                                "attention_mask": {0: "batch", 1: "samples"}}))
    # detection with dynamic H, W, and Mask R-CNN
    S.append(dict(name="keypointrcnn_r18_hw_op17", build=detection_small("keypoint"), opset=17, exporter=TS,
                  outputs=["boxes", "scores", "labels", "keypoints"],
                  output_axes={"boxes": {0: "n"}, "scores": {0: "n"}, "labels": {0: "n"}, "keypoints": {0: "n"}},
                  **image((1, 3, 320, 320), {2: "height", 3: "width"}), **big))
    S.append(dict(name="retinanet_r18_hw_op17", build=detection_small("retinanet"), opset=17, exporter=TS,
                  **outs3, **image((1, 3, 320, 320), {2: "height", 3: "width"}), **big))
    S.append(dict(name="maskrcnn_r18_op17", build=detection_small("mask"), opset=17, exporter=TS,
                  outputs=["boxes", "scores", "labels", "masks"],
                  output_axes={"boxes": {0: "n"}, "scores": {0: "n"}, "labels": {0: "n"}, "masks": {0: "n"}},
                  **image((1, 3, 320, 320), {}), **big))
    S.append(dict(name="retinanet_r18_dynamo_op18", build=detection_small("retinanet"), opset=18, exporter=DYNAMO,
                  **outs3, **image((1, 3, 320, 320), {}), **big))
    # RT-DETR (deformable attention via grid_sample, TopK query selection)
    rtdetr_kw = dict(backbone_config={"model_type": "rt_detr_resnet", "embedding_size": 16,
                                      "hidden_sizes": [16, 32, 48, 64], "depths": [1, 1, 1, 1],
                                      "layer_type": "basic", "out_features": ["stage2", "stage3", "stage4"]},
                     encoder_in_channels=[32, 48, 64], decoder_in_channels=[64, 64, 64], d_model=64, encoder_hidden_dim=64, encoder_layers=1,
                     encoder_ffn_dim=128, encoder_attention_heads=4, decoder_layers=1, decoder_ffn_dim=128,
                     decoder_attention_heads=4, num_queries=20, num_labels=5, decoder_n_points=2,
                     use_pretrained_backbone=False)
    S.append(dict(name="rt_detr_op17", build=hf_vision("RTDetrConfig", "RTDetrForObjectDetection", rtdetr_kw,
                                                       out="pred_boxes"),
                  opset=17, exporter=TS, outputs=["pred_boxes"], **image((1, 3, 64, 64), {0: "batch"})))
    # ================= round 3: static shapes (no dynamic axes) =================
    # onnxsim folds the Shape-driven reshape targets of static TorchScript exports and can then
    # fuse unmasked self-attention into com.microsoft.Attention
    for base in ("deit_distilled_op17", "yolos_op17", "mobilevit_op17", "segformer_op17", "wav2vec2_ctc_op17",
                 "hubert_op17", "dinov2_hw_op17", "beit_relpos_op17", "pegasus_encoder_op17", "convnextv2_grn_op17"):
        s = [x for x in S if x["name"] == base][0]
        S.append(dict(s, name=base.replace("_op17", "_static_op17"),
                      dynamic_axes={k: {} for k in s["dynamic_axes"]}, output_axes={}))
    whisper_kw = dict(encoder_layers=2, decoder_layers=2, d_model=64, encoder_attention_heads=4,
                      decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=1000,
                      num_mel_bins=80, max_source_positions=50, max_target_positions=64, pad_token_id=0,
                      bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    S.append(dict(name="whisper_encoder_static_op17", build=seq2seq_encoder("WhisperConfig",
                                                                            "WhisperForConditionalGeneration",
                                                                            whisper_kw, "speech"),
                  opset=17, exporter=TS, outputs=["last_hidden_state"],
                  inputs={"input_features": {"shape": [1, 80, 100], "dtype": "float32"}},
                  dynamic_axes={"input_features": {}}))
    S.append(dict(name="vit_static_op17", build=hf_vision("ViTConfig", "ViTForImageClassification", vit_kw),
                  opset=17, exporter=TS, outputs=["logits"], **image((1, 3, 32, 32), {})))
    S.append(dict(name="vit_dynamo_op18", build=hf_vision("ViTConfig", "ViTForImageClassification", vit_kw),
                  opset=18, exporter=DYNAMO, outputs=["logits"], **image((2, 3, 32, 32), {0: "batch"})))
    # ================= round 4: segmentation, diffusion =================
    S.append(dict(name="deeplabv3_mbv3_hw_op17", build=lambda: SegWrap(seg("deeplabv3_mobilenet_v3_large",
                                                                             weights_backbone=None, num_classes=5)),
                  opset=17, exporter=TS, outputs=["out"], output_axes={"out": {0: "batch", 2: "oh", 3: "ow"}},
                  **image((1, 3, 128, 128), {0: "batch", 2: "height", 3: "width"}), **big))
    S.append(dict(name="lraspp_mbv3_op17", build=lambda: SegWrap(seg("lraspp_mobilenet_v3_large",
                                                                       weights_backbone=None, num_classes=5)),
                  opset=17, exporter=TS, outputs=["out"], **image((1, 3, 128, 128), {0: "batch"})))
    S.append(dict(name="sd_unet_tiny_op17", build=unet_tiny, opset=17, exporter=TS, outputs=["noise_pred"],
                  inputs={"sample": {"shape": [2, 4, 16, 16], "dtype": "float32"},
                          "timestep": {"shape": [2], "dtype": "int64", "range": [0, 1000]},
                          "encoder_hidden_states": {"shape": [2, 7, 32], "dtype": "float32"}},
                  dynamic_axes={"sample": {0: "batch"}, "timestep": {0: "batch"},
                                "encoder_hidden_states": {0: "batch", 1: "seq"}}))
    S.append(dict(name="sd_unet_tiny_dynamo_op18", build=unet_tiny, opset=18, exporter=DYNAMO,
                  outputs=["noise_pred"],
                  inputs={"sample": {"shape": [2, 4, 16, 16], "dtype": "float32"},
                          "timestep": {"shape": [2], "dtype": "int64", "range": [0, 1000]},
                          "encoder_hidden_states": {"shape": [2, 7, 32], "dtype": "float32"}},
                  dynamic_axes={"sample": {0: "batch"}, "timestep": {0: "batch"},
                                "encoder_hidden_states": {0: "batch"}}))
    S.append(dict(name="sd_vae_decoder_tiny_op17", build=vae_decoder_tiny, opset=17, exporter=TS, outputs=["image"],
                  **image((1, 4, 16, 16), {0: "batch", 2: "h", 3: "w"}, name="latent")))
    # ================= round 5 =================
    for base in ("marian_decoder_with_past_op17", "mbart_decoder_with_past_op17"):
        s = [x for x in S if x["name"] == base][0]
        S.append(dict(s, name=base.replace("_op17", "_dynamo_op18"), opset=18, exporter=DYNAMO, auto_dims=True))
    S.append(dict(seq2seq_decoder_spec("whisper_decoder_with_past_dynamo_op18", "WhisperConfig",
                                       "WhisperForConditionalGeneration", whisper_kw, 2, 4, 16, 64, 1000, 18),
                  exporter=DYNAMO, auto_dims=True))
    qwen3_kw = dict(DEC, num_key_value_heads=2, head_dim=16)
    S.append(DecoderWithPast.spec("qwen3_qknorm_with_past_op17", "Qwen3Config", "Qwen3ForCausalLM", qwen3_kw,
                                  2, 2, 16, 1000, 17))
    gemma2_kw = dict(DEC, num_key_value_heads=2, head_dim=16, sliding_window=4, final_logit_softcapping=30.0,
                     attn_logit_softcapping=50.0)
    S.append(DecoderWithPast.spec("gemma2_softcap_with_past_op17", "Gemma2Config", "Gemma2ForCausalLM", gemma2_kw,
                                  2, 2, 16, 1000, 17))
    llama3_kw = dict(DEC, num_key_value_heads=2,
                     rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    S.append(DecoderWithPast.spec("llama3_ropescale_with_past_op17", "LlamaConfig", "LlamaForCausalLM", llama3_kw,
                                  2, 2, 16, 1000, 17))
    for base in ("qwen3_qknorm", "gemma2_softcap"):
        s = [x for x in S if x["name"].startswith(base)][0]
        S.append(dict(s, name=base + "_with_past_dynamo_op18", opset=18, exporter=DYNAMO, auto_dims=True))
    swin_kw = dict(image_size=64, patch_size=4, num_channels=3, embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                   window_size=4, num_labels=10)
    S.append(dict(name="swin_hf_hw_op17", build=hf_vision("SwinConfig", "SwinForImageClassification", swin_kw),
                  opset=17, exporter=TS, outputs=["logits"],
                  **image((1, 3, 64, 80), {0: "batch", 2: "height", 3: "width"})))
    S.append(dict(name="swinv2_hf_hw_op17", build=hf_vision("Swinv2Config", "Swinv2ForImageClassification", swin2_kw),
                  opset=17, exporter=TS, outputs=["logits"],
                  **image((1, 3, 64, 80), {0: "batch", 2: "height", 3: "width"})))
    S.append(dict(name="detr_hw_op17", build=hf_vision("DetrConfig", "DetrForObjectDetection", detr_kw,
                                                       out="pred_boxes"),
                  opset=17, exporter=TS, outputs=["pred_boxes"],
                  **image((1, 3, 64, 80), {0: "batch", 2: "height", 3: "width"})))
    conf_kw = dict(w2v_kw, position_embeddings_type="rotary")
    S.append(dict(name="wav2vec2_conformer_op17", build=hf_vision("Wav2Vec2ConformerConfig",
                                                                  "Wav2Vec2ConformerForCTC", conf_kw),
                  opset=17, exporter=TS, outputs=["logits"], output_axes={"logits": {0: "batch", 1: "frames"}},
                  inputs={"input_values": {"shape": [2, 1600], "dtype": "float32"}},
                  dynamic_axes={"input_values": {0: "batch", 1: "samples"}}))
    S.append(dict(name="marian_seq2seq_nopast_op17", build=nf.hf_plain("MarianConfig", "MarianMTModel", marian_kw),
                  names=["input_ids", "attention_mask", "decoder_input_ids"], opset=17, exporter=TS,
                  outputs=["logits"],
                  inputs={"input_ids": {"shape": [2, 8], "dtype": "int64", "range": [0, 1000]},
                          "attention_mask": {"shape": [2, 8], "dtype": "int64", "range": [1, 2]},
                          "decoder_input_ids": {"shape": [2, 5], "dtype": "int64", "range": [0, 1000]}},
                  dynamic_axes={"input_ids": {0: "batch", 1: "enc"}, "attention_mask": {0: "batch", 1: "enc"},
                                "decoder_input_ids": {0: "batch", 1: "dec"}}))
    return S


def export(work, only):
    import onnx
    from export_zoo import export_one
    os.makedirs(work, exist_ok=True)
    meta_path = os.path.join(work, "zoo_meta.json")
    log_path = os.path.join(work, "export_log.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    log = json.load(open(log_path)) if os.path.exists(log_path) else {}

    def save():
        json.dump(meta, open(meta_path, "w"), indent=1)
        json.dump(log, open(log_path, "w"), indent=1)

    for spec in specs():
        if only and not any(o in spec["name"] for o in only):
            continue
        t = time.time()
        try:
            special = spec.get("functions") or spec.get("auto_dims")
            if special:
                path, m, opset, mb = nf.export_special(spec, work)
            else:
                path, m, opset, mb = export_one(spec, work)
            log[spec["name"]] = {"ok": True, "nodes": len(m.graph.node), "opset": opset, "mb": round(mb, 2),
                                 "functions": len(m.functions), "exporter": spec["exporter"]}
            meta[spec["name"]] = {
                "file": os.path.basename(path), "exporter": spec["exporter"], "opset": opset,
                "inputs": spec["inputs"],
                "dynamic_axes": {k: {str(ax): s for ax, s in v.items()} for k, v in spec["dynamic_axes"].items()},
                "outputs": spec["outputs"]}
            print(f"{spec['name']:<36} {spec['exporter']:<11} op{opset:<3} {len(m.graph.node):>5} nodes "
                  f"{mb:>7.1f} MB {len(m.functions)} functions {time.time() - t:>6.1f} s", flush=True)
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"[:400]
            log[spec["name"]] = {"ok": False, "error": msg, "exporter": spec["exporter"]}
            print(f"{spec['name']:<36} EXPORT FAILED: {msg}", flush=True)
            if os.environ.get("ZOO_TRACEBACK"):
                traceback.print_exc()
        save()
    for key, fn in (("onnxscript", onnxscript_functions), ("noopt", dynamo_unoptimized)):
        if only and not any(key in o for o in only):
            continue
        try:
            name, path, m = fn(work)
            opset = {o.domain: o.version for o in m.opset_import}.get("")
            exp = "onnx.helper" if key == "onnxscript" else DYNAMO
            log[name] = {"ok": True, "nodes": len(m.graph.node), "opset": opset, "functions": len(m.functions),
                         "exporter": exp}
            meta[name] = {"file": os.path.basename(path), "exporter": exp, "opset": opset,
                          "inputs": {"x": {"shape": [2, 5, 32], "dtype": "float32"}},
                          "dynamic_axes": {"x": {"0": "batch", "1": "seq"}}, "outputs": [o.name for o in m.graph.output]}
            print(f"{name:<36} {exp:<11} op{opset} {len(m.graph.node)} nodes {len(m.functions)} functions")
        except Exception as e:  # noqa: BLE001
            log[key] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:400]}
            print(f"{key} EXPORT FAILED: {e}", flush=True)
            if os.environ.get("ZOO_TRACEBACK"):
                traceback.print_exc()
        save()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["export"])
    ap.add_argument("work", nargs="?", default="/tmp/nf2")
    ap.add_argument("--only", default=None)
    a = ap.parse_args()
    export(a.work, a.only.split(",") if a.only else None)


if __name__ == "__main__":
    main()
