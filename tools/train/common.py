"""Shared plumbing of the training scripts (tools/train_*.py): logging to stderr and a log file, seeds, time
budgets, the GPU setup (TF32, BF16 autocast), the Python standard library corpus and its file split, and a
safetensors writer/reader (the format is 8 bytes of header length, a JSON header, raw little-endian data;
written here so the pure-torch parts also run where the safetensors package is missing; every file is read
back by the safetensors package through transformers in tools/verify_default_models.py)."""
import contextlib
import hashlib
import json
import logging
import math
import os
import platform
import random
import struct
import sys
import time

import torch

from tools.train.files import dir_bytes, read_json, write_json  # noqa: F401 (re-exported)

log = logging.getLogger("train")


# Qwen2/Qwen3's pre-tokenizer split (tokenizer.json: a Split step with this regex, then ByteLevel without its own
# regex): every digit is its own piece, so a number is a run of ten digit tokens, never one of many merged ones.
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")


def qwen_pre_tokenizer():
    """The HF `tokenizers` pre-tokenizer of Qwen's tokenizer.json (tandem's tokenizer reads it, engine/io)."""
    from tokenizers import Regex, pre_tokenizers
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])


def setup_logging(path=None, name="train"):
    """Logs go to stderr and, when given, to `path` (each script has its own log file)."""
    global log
    log = logging.getLogger(name)
    log.setLevel(logging.INFO)
    log.handlers.clear()
    fmt = logging.Formatter("%(asctime)s %(name)s %(message)s", "%H:%M:%S")
    handlers = [logging.StreamHandler(sys.stderr)]
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        handlers.append(logging.FileHandler(path, mode="w"))
    for h in handlers:
        h.setFormatter(fmt)
        log.addHandler(h)
    return log


def seed_all(seed):
    random.seed(seed)
    torch.manual_seed(seed)


class Budget:
    """A wall-clock budget: training loops run until it is spent (sized by throughput, not epochs)."""

    def __init__(self, seconds):
        self.seconds = float(seconds)
        self.start = time.time()

    def elapsed(self):
        return time.time() - self.start

    def fraction(self):
        return min(1.0, self.elapsed() / max(self.seconds, 1e-9))

    def spent(self):
        return self.elapsed() >= self.seconds


def lr_at(fraction, step, peak, warmup_steps, floor=0.1):
    """Linear warm-up over `warmup_steps`, then cosine decay to floor·peak over the time budget."""
    if step < warmup_steps:
        return peak * (step + 1) / warmup_steps
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * fraction)))


def device():
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        return torch.device("cuda")
    return torch.device("cpu")


def autocast(dev):
    """BF16 autocast on the GPU; plain FP32 on the CPU (smoke runs)."""
    if dev.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ---- the corpus: the Python standard library's source ----

def stdlib_root():
    """The running interpreter's standard library (e.g. /usr/lib/python3.12)."""
    import sysconfig
    return sysconfig.get_paths()["stdlib"]


def stdlib_files(root):
    """Every .py file under root, sorted, site-packages/dist-packages and caches left out."""
    rels = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "dist-packages", "__pycache__"))
        for f in files:
            if f.endswith(".py"):
                rels.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(rels)


def corpus_info(root, rels, texts):
    names = hashlib.sha256("\n".join(rels).encode()).hexdigest()
    content = hashlib.sha256()
    for t in texts:
        content.update(hashlib.sha256(t.encode()).digest())
    return {"root": root, "python": platform.python_version(), "files": len(rels),
            "file_list_sha256": names, "content_sha256": content.hexdigest(),
            "chars": sum(len(t) for t in texts)}


def read_sources(root, rels):
    """(rels, texts) of the files that decode as UTF-8; the others are logged and left out."""
    keep, texts = [], []
    for r in rels:
        try:
            with open(os.path.join(root, r), encoding="utf-8") as f:
                texts.append(f.read())
            keep.append(r)
        except (UnicodeDecodeError, OSError) as e:
            log.info("corpus: skipping %s (%s)", r, type(e).__name__)
    return keep, texts


def split_files(rels, seed, heldout_fraction):
    """A deterministic split by file: held-out files are the first of a seeded shuffle."""
    order = list(rels)
    random.Random(seed).shuffle(order)
    n = max(1, int(round(len(order) * heldout_fraction)))
    held = set(order[:n])
    return [r for r in rels if r not in held], [r for r in rels if r in held]


# ---- safetensors ----

_CODES = {torch.float32: ("F32", torch.int32), torch.bfloat16: ("BF16", torch.int16),
          torch.float16: ("F16", torch.int16), torch.int64: ("I64", torch.int64)}
_DTYPES = {"F32": (torch.float32, torch.int32), "BF16": (torch.bfloat16, torch.int16),
           "F16": (torch.float16, torch.int16), "I64": (torch.int64, torch.int64)}


def save_safetensors(tensors, path, metadata=None):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        code, raw = _CODES[t.dtype]
        data = t.view(raw).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        dtype, raw = _DTYPES[h["dtype"]]
        lo, hi = h["data_offsets"]
        np_raw = {torch.int32: np.int32, torch.int16: np.int16, torch.int64: np.int64}[raw]
        arr = np.frombuffer(data[8 + n + lo:8 + n + hi], dtype=np_raw).copy()
        out[name] = torch.from_numpy(arr).view(dtype).reshape(h["shape"])
    return out
