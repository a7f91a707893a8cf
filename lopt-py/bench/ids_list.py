"""The cost of ``Encoding.ids`` (the Python list) of long encodings, in nanoseconds an id.

Usage::

    python lopt-py/bench/ids_list.py --tokenizer T.json --corpus docs.jsonl [--docs 28]

Encodes each document (cut to ``--max-bytes``) once on one thread, then times ``.ids`` twice on
that encoding: the first read (the shared ``int`` objects cold, as a caller meets them after an
encode) and a second one. Prints one line: summed time over summed ids for each read. Compare
wheels (e.g. with and without the ``abi3`` feature) by running this in each one's venv, taking
turns.
"""

from __future__ import annotations

import argparse
import json
import time

import lopt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--docs", type=int, default=28)
    ap.add_argument("--max-bytes", type=int, default=1_000_000)
    args = ap.parse_args()
    texts = []
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            texts.append(json.loads(line)["text"].encode()[: args.max_bytes].decode("utf-8", "ignore"))
            if len(texts) >= args.docs + 2:
                break
    tok = lopt.Tokenizer.from_file(args.tokenizer, threads=1)
    for text in texts[:2]:  # warm-up, and the background seed's time
        tok.encode(text).ids
    time.sleep(1.0)
    first = second = 0.0
    ids_total = 0
    for text in texts[2:]:
        encoding = tok.encode(text, add_special_tokens=False)
        start = time.perf_counter()
        ids = encoding.ids
        middle = time.perf_counter()
        again = encoding.ids
        end = time.perf_counter()
        first += middle - start
        second += end - middle
        ids_total += len(ids)
        del ids, again, encoding
    print(f"ids={ids_total} first_ns_per_id={first * 1e9 / ids_total:.1f} second_ns_per_id={second * 1e9 / ids_total:.1f}")


if __name__ == "__main__":
    main()
