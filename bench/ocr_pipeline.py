"""A small PP-OCR pipeline in numpy and Pillow for bench/real_weights.py: seeded text lines
rendered on pages, and the pre- and post-processing around PP-OCRv4's detection, the text
direction classifier and PP-OCRv4's recognition, as RapidOCR (rapidocr-onnxruntime 1.4.4)
does them, with these simplifications:

- boxes are axis-aligned rectangles: the connected regions of the thresholded, dilated
  probability map, each unclipped by PP-OCR's distance (area * unclip_ratio / perimeter) as a
  rectangle, not through minimum-area rotated rectangles and polygon offsetting (the rendered
  lines are horizontal);
- a crop is the rectangle cut out of the page (no perspective warp);
- the resizes are Pillow's bilinear, not OpenCV's;
- all crops go to the classifier and to the recognizer in one batch each (RapidOCR: batches
  of 6, sorted by aspect ratio), padded to the widest, and no text is dropped for a low score.
"""

import math

import numpy as np

PAGE_W, PAGE_H = 640, 480       # multiples of 32: the detector's input as is
LINES_PER_PAGE = 5
DET_THRESH, BOX_THRESH, UNCLIP_RATIO, MIN_SIZE = 0.3, 0.5, 1.6, 3
CLS_SHAPE, CLS_THRESH = (48, 192), 0.9
REC_H, REC_MIN_W = 48, 320

WORDS = ["Tensor", "core", "ONNX", "runtime", "Invoice", "total", "Page", "model", "Hello",
         "world", "batch", "Kernel", "delta", "Alpha", "zebra", "Quick", "brown", "Fox",
         "jumps", "OVER", "lazy", "Dog", "Night", "shift"]
PUNCT = [",", ".", ":", ";", "!", "?", "-", "/", "%", "#", "+", "="]


def text_lines(seed, n):
    """n seeded strings, in turn digits, mixed-case words, and words with punctuation."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            fmt = int(rng.integers(3))
            d = [int(v) for v in rng.integers(0, 100, 6)]
            if fmt == 0:
                s = "20%02d-%02d-%02d %02d:%02d" % (d[0], 1 + d[1] % 12, 1 + d[2] % 28,
                                                    d[3] % 24, d[4] % 60)
            elif fmt == 1:
                s = "%d.%02d %d" % (int(rng.integers(100, 99999)), d[0], int(rng.integers(10, 999)))
            else:
                s = "%03d %04d %02d" % (d[0] * 7 % 1000, int(rng.integers(0, 9999)), d[1])
        elif kind == 1:
            words = [str(w) for w in rng.choice(WORDS, int(rng.integers(2, 4)), replace=False)]
            s = " ".join(w.upper() if rng.random() < 0.2 else w for w in words)
        else:
            a, b = (str(w) for w in rng.choice(WORDS, 2, replace=False))
            p, q = (str(c) for c in rng.choice(PUNCT, 2, replace=False))
            s = "%s%s %s%s %d" % (a, p, b, q, int(rng.integers(1, 100)))
        out.append(s)
    return out


def render_pages(seed, pages):
    """(pages uint8 [N, H, W, 3] RGB, truth: [(page, box x0 y0 x1 y1, text, upside_down)]).
    Each page holds LINES_PER_PAGE lines, one of them upside down. Pillow's built-in scalable
    font (Pillow >= 10.1), so no system font is needed."""
    from PIL import Image, ImageDraw, ImageFont
    rng = np.random.default_rng(seed + 1)
    texts = text_lines(seed, pages * LINES_PER_PAGE)
    images, truth = [], []
    for p in range(pages):
        bg = int(rng.integers(225, 256))
        page = Image.new("RGB", (PAGE_W, PAGE_H), (bg, bg, bg))
        flipped = int(rng.integers(LINES_PER_PAGE))
        band = PAGE_H // LINES_PER_PAGE
        for i in range(LINES_PER_PAGE):
            text = texts[p * LINES_PER_PAGE + i]
            font = ImageFont.load_default(size=int(rng.integers(26, 35)))
            ink = tuple(int(v) for v in rng.integers(0, 70, 3))
            left, top, right, bottom = font.getbbox(text)
            w, h = right - left, bottom - top
            strip = Image.new("RGB", (w + 8, h + 8), (bg, bg, bg))
            ImageDraw.Draw(strip).text((4 - left, 4 - top), text, font=font, fill=ink)
            if i == flipped:
                strip = strip.rotate(180)
            x = int(rng.integers(16, max(17, PAGE_W - strip.width - 16)))
            y = i * band + (band - strip.height) // 2
            page.paste(strip, (x, y))
            truth.append((p, (x + 4, y + 4, x + 4 + w, y + 4 + h), text, i == flipped))
        images.append(np.asarray(page))
    return np.stack(images), truth


def normalize(images):
    """uint8 [N, H, W, 3] RGB -> float32 [N, 3, H, W] BGR in [-1, 1] (PP-OCR's mean and std
    0.5, BGR as OpenCV reads images)."""
    x = images[..., ::-1].astype(np.float32) / 255.0
    return np.ascontiguousarray(((x - 0.5) / 0.5).transpose(0, 3, 1, 2))


def _components(mask):
    """8-connected regions of a 2-D bool mask: a list of (y0, x0, y1, x1), ends exclusive,
    from runs of each row joined through union-find."""
    runs = []  # (row, start, end exclusive)
    for y in range(mask.shape[0]):
        row = np.concatenate(([0], mask[y].astype(np.int8), [0]))
        edges = np.flatnonzero(np.diff(row))
        runs += [(y, int(s), int(e)) for s, e in zip(edges[::2], edges[1::2])]
    parent = list(range(len(runs)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    prev_start = 0
    for i, (y, s, e) in enumerate(runs):
        j = prev_start
        while j < i and runs[j][0] < y - 1:
            j += 1
        prev_start = j
        while j < i and runs[j][0] == y - 1:
            if runs[j][1] <= e and s <= runs[j][2]:  # overlapping or diagonal
                parent[find(j)] = find(i)
            j += 1
    regions = {}
    for i, (y, s, e) in enumerate(runs):
        r = find(i)
        y0, x0, y1, x1 = regions.get(r, (y, s, y + 1, e))
        regions[r] = (min(y0, y), min(x0, s), max(y1, y + 1), max(x1, e))
    return sorted(regions.values())


def det_boxes(prob):
    """Boxes (x0, y0, x1, y1) of one [H, W] probability map, sorted top to bottom then left to
    right."""
    h, w = prob.shape
    mask = prob > DET_THRESH
    dil = mask.copy()  # OpenCV's dilation with a 2x2 kernel of ones, as PP-OCR's use_dilation
    dil[1:, :] |= mask[:-1, :]
    dil[:, 1:] |= mask[:, :-1]
    dil[1:, 1:] |= mask[:-1, :-1]
    boxes = []
    for y0, x0, y1, x1 in _components(dil):
        # sizes between the outer pixels' centres, as PP-OCR measures OpenCV's contour points
        bw, bh = x1 - 1 - x0, y1 - 1 - y0
        if min(bw, bh) < MIN_SIZE or float(prob[y0:y1, x0:x1].mean()) < BOX_THRESH:
            continue
        d = bw * bh * UNCLIP_RATIO / (2.0 * (bw + bh))
        if min(bw, bh) + 2 * d < MIN_SIZE + 2:
            continue
        boxes.append((max(0, int(round(x0 - d))), max(0, int(round(y0 - d))),
                      min(w, int(round(x1 - 1 + d))), min(h, int(round(y1 - 1 + d)))))
    return sorted(boxes, key=lambda b: (b[1] // 10, b[0]))


def crop(page, box):
    x0, y0, x1, y1 = box
    img = page[y0:y1, x0:x1]
    if img.shape[0] >= 1.5 * img.shape[1]:  # PP-OCR turns tall crops to read them sideways
        img = np.rot90(img)
    return np.ascontiguousarray(img)


def _resized(img, width, height):
    from PIL import Image
    return np.asarray(Image.fromarray(img).resize((width, height), Image.BILINEAR))


def _batch(crops, height, width):
    """Crops resized to the height (width by aspect ratio, at most width), normalized, padded
    with zeros on the right: float32 [N, 3, height, width]."""
    out = np.zeros((len(crops), 3, height, width), np.float32)
    for i, img in enumerate(crops):
        w = min(width, int(math.ceil(height * img.shape[1] / img.shape[0])))
        out[i, :, :, :w] = normalize(_resized(img, w, height)[None])[0]
    return out


def cls_input(crops):
    return _batch(crops, *CLS_SHAPE)


def cls_classes(out):
    """The classifier's [N, 2] scores -> per crop 180 (turn it) or 0."""
    return [180 if int(np.argmax(r)) == 1 and float(r[1]) > CLS_THRESH else 0 for r in out]


def rec_input(crops):
    ratio = max([REC_MIN_W / REC_H] + [c.shape[1] / c.shape[0] for c in crops])
    return _batch(crops, REC_H, int(REC_H * ratio))


def dictionary(rec_model_path):
    """CTC labels: blank, the dictionary in the recognition model's metadata ('character',
    one per line, as RapidOCR reads it), and the space."""
    import onnx
    m = onnx.load(rec_model_path, load_external_data=False)
    chars = [p.value for p in m.metadata_props if p.key == "character"]
    if not chars:
        raise ValueError("%s has no 'character' metadata (the dictionary)" % rec_model_path)
    return ["blank"] + chars[0].splitlines() + [" "]


def ctc_greedy(probs, labels):
    """[N, T, C] -> N strings: the best label per step, repeats merged, blanks dropped."""
    if probs.shape[-1] != len(labels):
        raise ValueError("the recognizer gives %d classes, the dictionary %d labels"
                         % (probs.shape[-1], len(labels)))
    texts = []
    for row in np.argmax(probs, axis=-1):
        keep = np.ones(len(row), bool)
        keep[1:] = row[1:] != row[:-1]
        texts.append("".join(labels[i] for i in row[keep & (row != 0)]))
    return texts
