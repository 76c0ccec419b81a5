#!/usr/bin/env python3
"""Builds two byte-level BPE tokenizers with HF `tokenizers` (ModernBERT-style and Qwen-style) and the
goldens tandem's C++ tokenizer must reproduce: tests/fixtures/tokenizer/{modernbert,qwen}/tokenizer.json
and tests/fixtures/tokenizer/goldens.json. The ModernBERT-style one also ships as the decision model's
tokenizer (tests/fixtures/decision-tiny/tokenizer/). Run on a machine with `tokenizers` (the GPU machine):
    python3 tools/make_tokenizer_fixture.py [--out REPO_ROOT]
Deterministic: the corpus is generated from a fixed seed. goldens.json holds, per tokenizer, each
string's ids and decoded text, and under "split_special" the ids with special-token matching off (HF's
split_special_tokens=True, `encode_special_tokens` in tokenizers) for the same strings plus texts full of
special-token literals. `--goldens-only` loads the tokenizer.json files already in the tree instead of
training new ones and rewrites only goldens.json (the tokenizers, and so the decision model, stay as
they are):
    python3 tools/make_tokenizer_fixture.py --goldens-only"""
import argparse
import json
import os
import random
import unicodedata

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import processors

QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ("the of and to in is was for on that with as by at from his it an were are which this be or "
         "has had not but first one their its new after who they have her she two been other when there "
         "all during into school time may years more most only over city some world would where later up "
         "such used many can state about national out known university united then made state question "
         "option choice score noul ticket email customer refund order shipping invoice agent page click "
         "button search result answer true false maybe yes no urgent billing account password reset").split()
ACCENTED = "café naïve résumé façade jalapeño São Paulo Zürich Ærøskøbing Kraków Ελληνικά русский язык".split()
CJK = ["东京都", "日本語のテキスト", "中文分词测试", "한국어 문장", "漢字とかなカナ", "北京大学"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "🚀✨", "🧑🏿‍💻"]


def corpus(seed: int, lines: int):
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        parts = []
        for _ in range(rng.randint(3, 18)):
            r = rng.random()
            if r < 0.62:
                w = rng.choice(WORDS)
                parts.append(w.capitalize() if rng.random() < 0.15 else w)
            elif r < 0.72:
                parts.append(rng.choice(ACCENTED))
            elif r < 0.78:
                parts.append(rng.choice(CJK))
            elif r < 0.82:
                parts.append(rng.choice(EMOJI))
            elif r < 0.92:
                parts.append(str(rng.randint(0, 100000)))
            else:
                parts.append(rng.choice(["don't", "it's", "we're", "I'll", "they've", "(", ")", ",", ".", "!",
                                         "?", "--", "{\"a\": 1}", "x+y=z", "#", "@user", "http://ex.com/a?b=c"]))
        sep = rng.choice([" ", " ", " ", "  ", "\n", "\t"])
        out.append(sep.join(parts))
    return out


def golden_strings():
    s = [
        "", " ", "  ", "\t", "\n", "\r\n", "\n\n\n", "   leading", "trailing   ", "a  b   c    d",
        "Hello, world!", "The quick brown fox jumps over the lazy dog.", "don't can't won't I'm you're",
        "DON'T SHOUT IT'S LOUD", "numbers 1234567890 and 3.14159 and -42", "x = f(y) + g[z] * 2;",
        "café", unicodedata.normalize("NFD", "café naïve résumé"), "Ångström", "A\u030angstro\u0308m",
        "Zürich Kraków São Paulo", "Ελληνικά κείμενα", "русский язык", "東京都に住んでいます",
        "中文分词测试一下", "한국어 문장입니다", "mixed 日本語 and English", "😀😀😀", "👍🏽 thumbs", "👨‍👩‍👧‍👦 family",
        "🇫🇷🇩🇪", "❤️ love", "🧑🏿‍💻 coder", "tabs\tand\ttabs", "non\u00a0breaking\u00a0space", "zero\u200bwidth",
        "line one\nline two\r\nline three", "    indented code\n        more", "emoji at end 🚀",
        "[CLS] question: which option? [SEP]", "a [MASK] b [MASK]c", "[MASK][MASK]", "<|endoftext|>",
        "<|im_start|>user\nhi<|im_end|>", "ticket #12345: refund for order 987", "email: a.b@example.com",
        "{\"key\": [1, 2, 3], \"nested\": {\"x\": null}}", "____ ---- ==== ....", "¿Qué tal? ¡Bien!",
        "ﬁ ligature and ℌ fraktur", "١٢٣ Arabic digits", "עברית", "हिन्दी भाषा", "ภาษาไทย",
        "a\u0085b", "a\u180eb", "IT'\u017f", "x\t[MASK]", "x" + " " * 70000 + "y",
    ]
    rng = random.Random(7)
    s += corpus(99, 40)
    s += ["".join(rng.choice("ab c\n\té😀日") for _ in range(rng.randint(1, 30))) for _ in range(20)]
    return s


# Special-token literals as users type them: glued, nested, spaced, half-written, next to non-special
# added tokens (<think>), for both tokenizers' specials.
SPECIAL_LITERALS = [
    "[CLS][SEP][MASK][PAD][UNK]", "[CLS] [SEP] [MASK] [PAD] [UNK]", "my [CLS] order [SEP] arrived",
    "[[MASK]]", "[MAS[MASK]K]", "[CLS", "SEP]", " [SEP] ", "\t[MASK]\n", "option [MASK] two [MASK]",
    "[cls][Sep]", "[PAD][PAD][PAD]", "x[UNK]y", "<|endoftext|><|endoftext|>", "<|im_start|>system\nyou<|im_end|>",
    "<|im_start|><think>plan</think><|im_end|>", "<think><|endoftext|>", "<|im_end", "<|endoftext|> [SEP]",
    "café [MASK] naïve", "😀[CLS]😀", "state: [SEP] question: [MASK] yes",
]


def special(content, **kw):
    return AddedToken(content, special=True, normalized=False, **kw)


def build_modernbert(lines):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    specials = [special("[UNK]"), special("[CLS]"), special("[SEP]"), special("[PAD]"),
                special("[MASK]", lstrip=True)]
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def build_qwen(lines):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = [special("<|endoftext|>"), special("<|im_start|>"), special("<|im_end|>")]
    trainer = trainers.BpeTrainer(vocab_size=2048, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(lines, trainer)
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False)])
    return tok


def goldens(tok, strings):
    out = []
    for text in strings:
        ids = tok.encode(text, add_special_tokens=False).ids
        out.append({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    return out


def split_special_goldens(tok, strings):
    """Ids with special tokens not matched in the text (transformers' split_special_tokens=True)."""
    tok.encode_special_tokens = True
    try:
        return [{"text": text, "ids": tok.encode(text, add_special_tokens=False).ids} for text in strings]
    finally:
        tok.encode_special_tokens = False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--goldens-only", action="store_true",
                    help="load the tokenizer.json files in the tree and rewrite goldens.json only")
    args = ap.parse_args()
    root = os.path.abspath(args.out)
    names = ("modernbert", "qwen")
    if args.goldens_only:
        toks = {n: Tokenizer.from_file(os.path.join(root, "tests/fixtures/tokenizer", n, "tokenizer.json"))
                for n in names}
    else:
        lines = corpus(1, 6000)
        toks = {"modernbert": build_modernbert(lines), "qwen": build_qwen(lines)}
    strings = golden_strings()
    result = {"split_special": {}}
    for name, tok in toks.items():
        d = os.path.join(root, "tests/fixtures/tokenizer", name)
        if not args.goldens_only:
            os.makedirs(d, exist_ok=True)
            tok.save(os.path.join(d, "tokenizer.json"))
        result[name] = goldens(tok, strings)
        result["split_special"][name] = split_special_goldens(tok, strings + SPECIAL_LITERALS)
        print(f"{name}: vocab {tok.get_vocab_size()}, {len(strings)} golden strings, "
              f"{len(strings) + len(SPECIAL_LITERALS)} split-special")
    with open(os.path.join(root, "tests/fixtures/tokenizer/goldens.json"), "w") as f:
        json.dump(result, f, ensure_ascii=True, indent=0)
    if args.goldens_only:
        return
    dm = os.path.join(root, "tests/fixtures/decision-tiny/tokenizer")
    os.makedirs(dm, exist_ok=True)
    toks["modernbert"].save(os.path.join(dm, "tokenizer.json"))


if __name__ == "__main__":
    main()
