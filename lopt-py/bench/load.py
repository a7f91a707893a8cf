"""Load time: ``lopt.Tokenizer.from_file`` against ``tokenizers.Tokenizer.from_file``.

Usage::

    python lopt-py/bench/load.py --tokenizer T.json [--rounds 4]

The two loads take turns (the first alternating), each after a pause that lets the previous
lopt tokenizer's background seed finish, and each object is freed before the next load. Prints
one line: the median of each, their ratio (lopt / HF) and every time in milliseconds.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import tokenizers

import lopt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    took: dict[str, list[float]] = {"hf": [], "lopt": []}
    for round_ in range(args.rounds):
        for side in ("hf", "lopt") if round_ % 2 else ("lopt", "hf"):
            time.sleep(1.5)
            start = time.perf_counter()
            loaded = (tokenizers.Tokenizer if side == "hf" else lopt.Tokenizer).from_file(args.tokenizer)
            took[side].append(time.perf_counter() - start)
            del loaded
            gc.collect()
    hf, lo = statistics.median(took["hf"]), statistics.median(took["lopt"])
    print(
        f"hf_ms={hf * 1e3:.0f} lopt_ms={lo * 1e3:.0f} lopt/hf={lo / hf:.2f} "
        f"hf={[round(t * 1e3) for t in took['hf']]} lopt={[round(t * 1e3) for t in took['lopt']]}"
    )


if __name__ == "__main__":
    main()
