"""False refusals of `infopt optimize` (verification on) over a zoo of real exports.

Not a test: it exports torchvision models that keep BatchNorm (random weights,
eval mode, random BN statistics so that folding BN changes every weight),
adds the real models it finds, runs the default command on each and prints one
table. Needs torch, torchvision and onnxruntime in the Python that runs it:

    /work/tvenv/bin/python bench/verify_zoo.py export ZOO [--only SUBSTR,..]
    /work/tvenv/bin/python bench/verify_zoo.py run ZOO [--infopt target/release/infopt] [--only ..]

`export` writes ZOO/*.onnx (nothing is downloaded: weights=None everywhere).
Each torchvision model is exported by the TorchScript exporter with
training=PRESERVE (in eval mode, so BatchNormalization nodes survive rather
than being folded by torch) at opset 13 with a dynamic batch, and at opset 17
with a dynamic batch and, for fully convolutional ones, dynamic H and W;
some also by the dynamo exporter (opset 18). `--real DIR` (repeatable) links
every *.onnx of DIR into the zoo (PP-OCR, magika, silero, ...).

`run` calls `infopt optimize MODEL -o OUT --json` for each model, the command
a user types, with ORT_DYLIB_PATH pointing at the onnxruntime library of the
running Python (as `pip install onnxruntime` would provide it), and tabulates
exit code, the verification verdict (backend, worst max abs, max abs over the
output's scale, lowest cosine), wall time and the error's last line. A
refusal (exit 4) writes nothing, so it is then checked independently: the
same command with `--no-verify` writes the rewrite, and original and rewrite
run in ONNX Runtime on the same inputs; a refusal whose outputs agree there
within 1e-5 of the output's scale counts as a false refusal. Results go to
ZOO/verify_zoo.json (`--keep` reuses them).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time
import traceback
import warnings

warnings.filterwarnings("ignore")


# ----------------------------------------------------------------------------
# Export
# ----------------------------------------------------------------------------
def tv_specs():
    """(name, builder, image size, fully convolutional) for each torchvision model."""
    import torchvision.models as M

    def seg(fn):
        return lambda: Logits(fn(weights=None, weights_backbone=None, aux_loss=False))

    def det_backbone(name):
        from torchvision.models.detection.backbone_utils import resnet_fpn_backbone, mobilenet_backbone

        def build():
            if name.startswith("resnet"):
                b = resnet_fpn_backbone(backbone_name=name, weights=None, trainable_layers=5,
                                        norm_layer=__import__("torch").nn.BatchNorm2d)
            else:
                b = mobilenet_backbone(backbone_name=name, weights=None, fpn=True, trainable_layers=6,
                                       norm_layer=__import__("torch").nn.BatchNorm2d)
            return Tupled(b)
        return build

    S = [
        ("resnet18", lambda: M.resnet18(), 224, False),
        ("resnet50", lambda: M.resnet50(), 224, False),
        ("resnet101", lambda: M.resnet101(), 224, False),
        ("resnext50_32x4d", lambda: M.resnext50_32x4d(), 224, False),
        ("wide_resnet50_2", lambda: M.wide_resnet50_2(), 224, False),
        ("densenet121", lambda: M.densenet121(), 224, False),
        ("mobilenet_v2", lambda: M.mobilenet_v2(), 224, False),
        ("mobilenet_v3_small", lambda: M.mobilenet_v3_small(), 224, False),
        ("mobilenet_v3_large", lambda: M.mobilenet_v3_large(), 224, False),
        ("efficientnet_b0", lambda: M.efficientnet_b0(), 224, False),
        ("efficientnet_b1", lambda: M.efficientnet_b1(), 240, False),
        ("efficientnet_b2", lambda: M.efficientnet_b2(), 260, False),
        ("efficientnet_b3", lambda: M.efficientnet_b3(), 300, False),
        ("efficientnet_v2_s", lambda: M.efficientnet_v2_s(), 224, False),
        ("regnet_x_400mf", lambda: M.regnet_x_400mf(), 224, False),
        ("regnet_y_400mf", lambda: M.regnet_y_400mf(), 224, False),
        ("regnet_y_1_6gf", lambda: M.regnet_y_1_6gf(), 224, False),
        ("mnasnet0_5", lambda: M.mnasnet0_5(), 224, False),
        ("mnasnet1_0", lambda: M.mnasnet1_0(), 224, False),
        ("shufflenet_v2_x0_5", lambda: M.shufflenet_v2_x0_5(), 224, False),
        ("shufflenet_v2_x1_0", lambda: M.shufflenet_v2_x1_0(), 224, False),
        ("googlenet", lambda: M.googlenet(aux_logits=False, init_weights=True), 224, False),
        ("inception_v3", lambda: M.inception_v3(aux_logits=False, init_weights=True), 299, False),
        ("squeezenet1_0", lambda: M.squeezenet1_0(), 224, False),
        ("squeezenet1_1", lambda: M.squeezenet1_1(), 224, False),
        ("convnext_tiny", lambda: M.convnext_tiny(), 224, False),
        ("vgg11_bn", lambda: M.vgg11_bn(), 224, False),
        ("vgg16_bn", lambda: M.vgg16_bn(), 224, False),
        ("fcn_resnet50", seg(__import__("torchvision").models.segmentation.fcn_resnet50), 256, True),
        ("deeplabv3_mobilenet_v3_large",
         seg(__import__("torchvision").models.segmentation.deeplabv3_mobilenet_v3_large), 256, True),
        ("lraspp_mobilenet_v3_large",
         lambda: Logits(__import__("torchvision").models.segmentation.lraspp_mobilenet_v3_large(
             weights=None, weights_backbone=None)), 256, True),
        ("resnet18_fpn", det_backbone("resnet18"), 256, True),
        ("mobilenet_v3_large_fpn", det_backbone("mobilenet_v3_large"), 256, True),
    ]
    return S


class Logits(__import__("torch").nn.Module):
    """Segmentation models return a dict; the export takes its 'out'."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


class Tupled(__import__("torch").nn.Module):
    """FPN backbones return an OrderedDict of feature maps; the export takes the values."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return tuple(self.m(x).values())


def randomize_bn(model, gen):
    """Non-trivial BN statistics and affine parameters, so the fold changes every weight.

    Means around 0 and variances in [0.5, 2] keep activations in a sane range
    through 100 layers (a variance near 0 would blow them up, and a random net
    whose logits are 1e6 says nothing about a user's model).
    """
    import torch
    n = 0
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.2)
            m.running_var.copy_(torch.rand(c, generator=gen) * 1.5 + 0.5)
            if m.affine:
                m.weight.data.copy_(torch.rand(c, generator=gen) + 0.5)
                m.bias.data.copy_(torch.randn(c, generator=gen) * 0.2)
            n += 1
    return n


def export_tv(name, build, size, fully_conv, out_dir, variants):
    import onnx
    import torch
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    model = build().eval()
    with torch.no_grad():
        bns = randomize_bn(model, gen)
    x = torch.randn(1, 3, size, size, generator=gen)
    rows = []
    for variant in variants:
        path = os.path.join(out_dir, f"{name}_{variant}.onnx")
        if os.path.exists(path):
            rows.append((path, "exists"))
            continue
        t0 = time.time()
        outs = model(x)
        n_out = len(outs) if isinstance(outs, tuple) else 1
        out_names = [f"out{i}" for i in range(n_out)] if n_out > 1 else ["logits"]
        dyn = {"input": {0: "batch"}}
        if variant == "op17hw" and fully_conv:
            dyn = {"input": {0: "batch", 2: "height", 3: "width"}}
        for o in out_names:
            dyn[o] = {0: "batch"}
        try:
            with torch.no_grad():
                if variant.startswith("dynamo"):
                    from torch.export import Dim
                    # An example batch of 1 would be specialized away by torch.export.
                    shapes = ({0: Dim("batch", min=1, max=64)},)
                    prog = torch.onnx.export(model, (x.repeat(2, 1, 1, 1),), dynamo=True, opset_version=18,
                                             input_names=["input"], output_names=out_names,
                                             dynamic_shapes=shapes, external_data=False, verbose=False)
                    prog.save(path, external_data=False)
                else:
                    opset = 13 if variant == "op13" else 17
                    torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["input"],
                                      output_names=out_names, dynamic_axes=dyn,
                                      training=torch.onnx.TrainingMode.PRESERVE,
                                      do_constant_folding=True, dynamo=False)
            m = onnx.load(path, load_external_data=False)
            kept = sum(1 for n in m.graph.node if n.op_type == "BatchNormalization")
            rows.append((path, f"{time.time() - t0:.1f}s, {len(m.graph.node)} nodes, "
                               f"{kept} BN kept of {bns}"))
        except Exception as e:  # noqa: BLE001 - one line per failed export, keep going
            if os.path.exists(path):
                os.remove(path)
            rows.append((path, f"EXPORT FAILED: {type(e).__name__}: {str(e).splitlines()[0][:150]}"))
    return rows


def cmd_export(a):
    os.makedirs(a.zoo, exist_ok=True)
    only = a.only.split(",") if a.only else None
    for d in a.real or []:
        for p in sorted(glob.glob(os.path.join(d, "*.onnx"))):
            base = os.path.basename(p)
            if only and not any(s in base for s in only):
                continue
            dst = os.path.join(a.zoo, "real_" + base)
            if not os.path.exists(dst):
                os.symlink(os.path.abspath(p), dst)
                print(f"{dst}: linked")
    for name, build, size, fully_conv in tv_specs():
        if only and not any(s in name for s in only):
            continue
        variants = ["op13", "op17hw" if fully_conv else "op17"]
        if name in a.dynamo.split(","):
            variants.append("dynamo18")
        try:
            for path, what in export_tv(name, build, size, fully_conv, a.zoo, variants):
                print(f"{path}: {what}", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"{name}: BUILD FAILED: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc()


# ----------------------------------------------------------------------------
# Run
# ----------------------------------------------------------------------------
def ort_library():
    import onnxruntime
    libs = glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), "capi", "libonnxruntime.so*"))
    return sorted(libs)[0] if libs else None


def independent_check(model, out, report):
    """Original and infopt's unverified output in ONNX Runtime on the inputs infopt used
    (their shapes; values regenerated): max |a-b| / max |b| over outputs, or an error string."""
    import numpy as np
    import onnxruntime as ort
    shapes = dict((n, d) for n, d in (report.get("verification") or {}).get("input_shapes", []))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s0 = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    s1 = ort.InferenceSession(out, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in s0.get_inputs():
        shape = shapes.get(i.name) or [d if isinstance(d, int) else 1 for d in i.shape]
        if "float" in i.type:
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
        else:
            feeds[i.name] = rng.integers(0, 16, shape).astype(np.int64)
    worst = 0.0
    for a, b in zip(s1.run(None, feeds), s0.run(None, feeds)):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        scale = max(np.abs(b).max(), 1e-30) if b.size else 1.0
        worst = max(worst, float(np.abs(a - b).max() / scale) if b.size else 0.0)
    return worst


def summarize(report):
    v = (report or {}).get("verification")
    if not v:
        return None
    outs = v.get("outputs", [])
    max_abs = max((o.get("max_abs", 0.0) for o in outs), default=0.0)
    scaled = max((o.get("max_abs", 0.0) / max(o.get("scale", 0.0), 1e-300) for o in outs
                  if o.get("max_abs", 0.0) > 0), default=0.0)
    cos = min((o.get("cosine", 1.0) for o in outs), default=1.0)
    # Elements outside rtol 1e-4 / atol 1e-5: what the element-wise criterion would refuse.
    mismatches = sum(o.get("mismatches", 0) for o in outs)
    return dict(backend=v.get("backend", {}).get("name", "?"), passed=v.get("passed"),
                max_abs=max_abs, scaled=scaled, cosine=cos, mismatches=mismatches,
                shapes=";".join(f"{n}:{'x'.join(map(str, d))}" for n, d in v.get("input_shapes", [])))


def cmd_run(a):
    infopt = os.path.abspath(a.infopt)
    env = dict(os.environ)
    lib = ort_library()
    if lib:
        env["ORT_DYLIB_PATH"] = lib
    out_dir = os.path.join(a.zoo, "out")
    os.makedirs(out_dir, exist_ok=True)
    only = a.only.split(",") if a.only else None
    models = sorted(p for p in glob.glob(os.path.join(a.zoo, "*.onnx")))
    results_path = os.path.join(a.zoo, "verify_zoo.json")
    results = json.load(open(results_path)) if os.path.exists(results_path) and a.keep else {}
    print(f"ORT_DYLIB_PATH={env.get('ORT_DYLIB_PATH')}  infopt={infopt}", flush=True)
    hdr = f"{'model':<44} {'exit':>4} {'verdict':<8} {'backend':<8} {'max abs':>9} {'abs/scale':>9} {'cosine':>10} {'secs':>6}  note"
    print(hdr)
    print("-" * len(hdr), flush=True)
    for m in models:
        name = os.path.basename(m)[:-5]
        if only and not any(s in name for s in only):
            continue
        if a.keep and name in results:
            r = results[name]
        else:
            out = os.path.join(out_dir, name + ".opt.onnx")
            for f in glob.glob(out + "*"):
                os.remove(f)
            cmd = [infopt, "optimize", m, "-o", out, "--json"]
            t0 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.timeout)
            secs = time.time() - t0
            try:
                report = json.loads(p.stdout) if p.stdout.strip() else None
            except json.JSONDecodeError:
                report = None
            err = [l for l in p.stderr.splitlines() if l.strip()]
            r = dict(cmd=" ".join(cmd), exit=p.returncode, secs=secs, summary=summarize(report),
                     error=err[-1] if err and p.returncode else "", notes=(report or {}).get("notes", []),
                     written=os.path.exists(out))
            if p.returncode == 4:
                # Was the refusal right? Same rewrite without verification, judged in ORT.
                q = subprocess.run(cmd + ["--no-verify"], capture_output=True, text=True, env=env,
                                   timeout=a.timeout)
                try:
                    r["ort_scaled_error"] = independent_check(m, out, report or {}) if q.returncode == 0 else None
                except Exception as e:  # noqa: BLE001
                    r["ort_scaled_error"] = f"{type(e).__name__}: {e}"
            results[name] = r
            json.dump(results, open(results_path, "w"), indent=1)
        s = r["summary"] or {}
        verdict = {0: "passed", 4: "REFUSED", 7: "no-run", 3: "load", 1: "error"}.get(r["exit"], f"exit{r['exit']}")
        note = r["error"][:110]
        if "ort_scaled_error" in r:
            note = f"ORT abs/scale without verify: {r['ort_scaled_error']} | " + note
        print(f"{name:<44} {r['exit']:>4} {verdict:<8} {s.get('backend', '-'):<8} "
              f"{s.get('max_abs', float('nan')):>9.2e} {s.get('scaled', float('nan')):>9.2e} "
              f"{s.get('cosine', float('nan')):>10.7f} {r['secs']:>6.1f}  {note}", flush=True)
    rows = [results[n] for n in results if not only or any(s in n for s in only)]
    codes = {}
    for r in rows:
        codes[r["exit"]] = codes.get(r["exit"], 0) + 1
    print(f"\n{len(rows)} models; exit codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items())))
    false = [n for n, r in results.items() if r["exit"] == 4 and isinstance(r.get("ort_scaled_error"), float)
             and r["ort_scaled_error"] < 1e-5]
    print(f"false refusals (exit 4, ORT agrees to 1e-5 of scale): {len(false)} {false}")
    elementwise = [n for n, r in results.items() if (r.get("summary") or {}).get("mismatches")]
    print(f"verified models the element-wise criterion (rtol 1e-4, atol 1e-5) would refuse: "
          f"{len(elementwise)} {elementwise}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("zoo")
    e.add_argument("--only")
    e.add_argument("--real", action="append",
                   help="folder whose *.onnx files join the zoo (linked, named real_*)")
    e.add_argument("--dynamo", default="resnet50,mobilenet_v3_large,efficientnet_b0,convnext_tiny",
                   help="models also exported by the dynamo exporter at opset 18")
    r = sub.add_parser("run")
    r.add_argument("zoo")
    r.add_argument("--infopt", default="target/release/infopt")
    r.add_argument("--only")
    r.add_argument("--keep", action="store_true", help="reuse results of models already run")
    r.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()
    {"export": cmd_export, "run": cmd_run}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
