#!/usr/bin/env python3
"""Writes the pathological inputs of docs/benchmarks.md section 4 as JSONL files for `lopt bench`:
each file holds a 200 KB prose warm-up document, then 1 MB of one letter, of spaces, of random
digits, of one CJK character, random base64, lodash.js minified to one line, or prose.

    python3 scripts/make_pathological.py OUT_DIR   (needs ../shared/corpora)
"""
import base64, json, os, random, re, sys

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/bench"
corpora = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpora")
os.makedirs(out, exist_ok=True)
random.seed(7)
MB = 1_000_000
with open(os.path.join(corpora, "en_verylong.jsonl"), encoding="utf-8") as f:
    prose = "".join(json.loads(line)["text"] for _, line in zip(range(12), f))[:MB]
mixed = [json.loads(line) for line in open(os.path.join(corpora, "mixed_hard.jsonl"), encoding="utf-8")]
js = next(d["text"] for d in mixed if d["id"] == "code/js/lodash.js")
js = re.sub(r"/\*.*?\*/", "", js, flags=re.S)
js = re.sub(r"//[^\n]*", "", js)
js = re.sub(r"\s+", " ", js)
js = re.sub(r"\s*([{}();,=+\-*/<>:?!&|\[\]])\s*", r"\1", js)
cases = {
    "prose": prose,
    "one_letter": "a" * MB,
    "spaces": " " * MB,
    "digits": "".join(random.choice("0123456789") for _ in range(MB)),
    "one_cjk": "中" * (MB // 3),
    "base64": base64.b64encode(random.randbytes(750_000)).decode(),
    "minified_js": (js * (MB // len(js) + 1))[:MB],
}
for name, text in cases.items():
    with open(os.path.join(out, f"{name}.jsonl"), "w", encoding="utf-8") as f:
        f.write(json.dumps({"text": prose[:200_000]}) + "\n")
        f.write(json.dumps({"text": text}) + "\n")
