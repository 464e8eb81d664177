"""piper-tts==1.8.0's two text models: libtashkeel (Arabic diacritics, a
torch transformer over characters, opset 16) and Nakdimon (Hebrew niqqud,
tf2onnx BiLSTMs in Loops, float character ids).

    python bench/unseen_families/gen27_piper.py PIPER_DIR PYARABIC_DIR OUT_DIR

PIPER_DIR: the unzipped wheel (holding `piper/tashkeel/` and
`piper/hebrew/`); PYARABIC_DIR: the unzipped PyArabic 0.6.15 wheel, whose
proper-noun and number tables give 52k Arabic words. Sentences of 3-10
words, diacritics stripped, no hints (as piper feeds undiacritized text);
Hebrew sentences of random letters (no Hebrew corpus here: agreement with
FP32 only). Writes OUT_DIR/{tashkeel,nakdimon}/{calib,held}/NNNN.npz (64 and
200 samples).
"""
import importlib.util
import json
import os
import random
import re
import sys

import numpy as np


def tashkeel(piper, pyarabic, out):
    src = "".join(open(os.path.join(pyarabic, "pyarabic", f), encoding="utf-8").read()
                  for f in ("propernouns.py", "number_const.py"))
    marks = {chr(c) for c in range(0x064B, 0x0653)}
    ids = json.load(open(os.path.join(piper, "piper/tashkeel/input_id_map.json"), encoding="utf-8"))
    words = ["".join(c for c in w if c not in marks) for w in re.findall(r"[\u0621-\u064A\u064B-\u0652]+", src)]
    words = [w for w in words if len(w) > 1 and all(c in ids for c in w)]
    rng = random.Random(5)

    def sample():
        text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 10)))
        chars = np.array([[ids[c] for c in text]], np.int64)
        return dict(char_inputs=chars, diac_inputs=np.ones_like(chars),
                    input_lengths=np.array([chars.shape[1]], np.int64))

    write(out, "tashkeel", sample)


def nakdimon(piper, out):
    spec = importlib.util.spec_from_file_location("nakdimon", os.path.join(piper, "piper/hebrew/__init__.py"))
    heb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(heb)
    letters = [chr(c) for c in range(0x05D0, 0x05EB)]
    rng = random.Random(3)

    def sample():
        text = " ".join("".join(rng.choice(letters) for _ in range(rng.randint(2, 7)))
                        for _ in range(rng.randint(3, 9)))
        return dict(input_1=np.array([[heb._CHAR_TO_ID[heb.normalize(c)] for c in text]], np.float32))

    write(out, "nakdimon", sample)


def write(out, name, sample):
    for part, n in (("calib", 64), ("held", 200)):
        os.makedirs(os.path.join(out, name, part), exist_ok=True)
        for i in range(n):
            np.savez(os.path.join(out, name, part, f"{i:04d}.npz"), **sample())


if __name__ == "__main__":
    piper_dir, pyarabic_dir, out_dir = sys.argv[1:4]
    tashkeel(piper_dir, pyarabic_dir, out_dir)
    nakdimon(piper_dir, out_dir)
