#!/usr/bin/env python3
"""Writes the pathological inputs of docs/benchmarks.md section 4 as JSONL files for `lopt bench`:
each file holds a 200 KB prose warm-up document, then 1 MB of one letter, of spaces, of random
digits, of one CJK character, random base64, lodash.js minified to one line, prose, or Chinese
prose (`zh`, from zh_long).

    python3 scripts/make_pathological.py OUT_DIR [--docs N]   (needs ../shared/corpora)

`--docs N` writes N timed documents of 1 MB after the warm-up instead of one (fresh random digits
and base64, the next megabyte of prose, lodash rotated), so that a benchmark's CPU time is not
read off one 1 MB document: `lopt bench`'s `cpu_seconds` moves in steps of a few milliseconds.
With N = 1 the files are the ones earlier sessions measured.
"""
import argparse, base64, json, os, random, re

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("out", nargs="?", default="/tmp/bench")
parser.add_argument("--docs", type=int, default=1, help="timed documents of 1 MB per file")
args = parser.parse_args()
corpora = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpora")
os.makedirs(args.out, exist_ok=True)
random.seed(7)
MB = 1_000_000


def corpus_text(name, chars):
    """The corpus's documents joined until `chars` characters, cut there."""
    text = ""
    with open(os.path.join(corpora, name), encoding="utf-8") as f:
        for line in f:
            text += json.loads(line)["text"]
            if len(text) >= chars:
                break
    return text[:chars]


def first_mb(text):
    """The longest prefix of `text` of at most 1 MB in UTF-8."""
    return text.encode("utf-8")[:MB].decode("utf-8", errors="ignore")


n = args.docs
prose = corpus_text("en_verylong.jsonl", max(12 * 540_000, n * MB))
chinese = corpus_text("zh_long.jsonl", n * MB)
mixed = [json.loads(line) for line in open(os.path.join(corpora, "mixed_hard.jsonl"), encoding="utf-8")]
js = next(d["text"] for d in mixed if d["id"] == "code/js/lodash.js")
js = re.sub(r"/\*.*?\*/", "", js, flags=re.S)
js = re.sub(r"//[^\n]*", "", js)
js = re.sub(r"\s+", " ", js)
js = re.sub(r"\s*([{}();,=+\-*/<>:?!&|\[\]])\s*", r"\1", js)
cases = {
    "prose": lambda i: prose[i * MB:(i + 1) * MB],
    "one_letter": lambda i: "a" * MB,
    "spaces": lambda i: " " * MB,
    "digits": lambda i: "".join(random.choice("0123456789") for _ in range(MB)),
    "one_cjk": lambda i: "中" * (MB // 3),
    "base64": lambda i: base64.b64encode(random.randbytes(750_000)).decode(),
    "minified_js": lambda i: ((js * (MB // len(js) + 2))[i * 997:])[:MB],
    "zh": lambda i: first_mb(chinese[i * MB // 3:]),
}
for name, make in cases.items():
    with open(os.path.join(args.out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
        f.write(json.dumps({"text": prose[:200_000]}) + "\n")
        for i in range(n):
            f.write(json.dumps({"text": make(i)}) + "\n")
