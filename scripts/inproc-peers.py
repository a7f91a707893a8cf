#!/usr/bin/env python3
"""lopt's Python package against an exact peer in one process, document by document.

On a host whose speed drifts (M3: one engine's cell moved by up to 1.5x between passes of
`bench_peers.py`), the two engines take turns on every document (the first alternating), so both
see the same moment of the host, as `scripts/inproc-ab.sh` does for two lopt sources. Each engine
is loaded once, warmed on the corpus's first document, given a second for lopt's background seed,
then encodes every further document once (fresh to both), with the call a user makes:
`encode(text, add_special_tokens=False).ids`. Both run one thread (`threads=1`;
`FASTOKENS_BPE_THREADS=1`); `--threads` sets lopt's. The ids are compared after each timed call.

    FASTOKENS_BPE_THREADS=1 python scripts/inproc-peers.py --corpus /work/en30.jsonl \\
        --tokenizer ../shared/tokenizers/qwen3/tokenizer.json --peer fastokens

Prints one line a document and a summary: the median over documents of peer time / lopt time
(above 1: lopt faster), its quartiles, and the ratio of summed times.
"""
import argparse
import json
import os
import statistics
import time

from bench_peers import load_encoder


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--peer", default="fastokens", help="a method of bench_peers.py (fastokens, gigatoken, hf, ...)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--docs", type=int, default=29)
    ap.add_argument("--max-bytes", type=int, default=1_000_000)
    args = ap.parse_args()
    os.environ.setdefault("FASTOKENS_BPE_THREADS", "1")
    texts = []
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"].encode("utf-8")[: args.max_bytes].decode("utf-8", "ignore")
            texts.append(text)
            if len(texts) > args.docs:
                break
    import lopt
    tok = lopt.Tokenizer.from_file(args.tokenizer, threads=args.threads)
    lopt_encode = lambda text: tok.encode(text, add_special_tokens=False).ids  # noqa: E731
    name = os.path.basename(os.path.dirname(os.path.abspath(args.tokenizer)))
    peer_encode = load_encoder(args.peer, args.tokenizer, name)
    if list(lopt_encode(texts[0])) != list(peer_encode(texts[0])):
        raise SystemExit("warm-up document: the engines disagree")
    time.sleep(1.0)
    ratios, sums = [], [0.0, 0.0]
    for i, text in enumerate(texts[1:], 1):
        order = [("lopt", lopt_encode), ("peer", peer_encode)]
        if i % 2:
            order.reverse()
        took, ids = {}, {}
        for side, encode in order:
            start = time.perf_counter()
            out = encode(text)
            took[side] = time.perf_counter() - start
            ids[side] = out
        if list(ids["lopt"]) != list(ids["peer"]):
            raise SystemExit(f"document {i}: the engines disagree")
        ratios.append(took["peer"] / took["lopt"])
        sums[0] += took["peer"]
        sums[1] += took["lopt"]
        print(f"doc={i} bytes={len(text.encode())} lopt_s={took['lopt']:.6f} peer_s={took['peer']:.6f}")
    q = statistics.quantiles(ratios, n=4)
    print(f"summary peer={args.peer} threads={args.threads} peer/lopt median={statistics.median(ratios):.3f} "
          f"[{q[0]:.3f}-{q[2]:.3f}] ({len(ratios)} docs); summed {sums[0] / sums[1]:.3f}")


if __name__ == "__main__":
    main()
