#!/usr/bin/env python3
"""Tokenize a JSONL corpus with HuggingFace `datasets` (`map(batched=True, num_proc=2)`) and lopt.

    python examples/datasets_map.py --tokenizer PATH IN.jsonl OUT_DIR [--num-proc 2]

PATH is either a model folder (tokenizer.json + tokenizer_config.json): the transformers tokenizer
is loaded with `AutoTokenizer.from_pretrained` and `lopt.accelerate`d, the usual way to prepare
training data; or a tokenizer.json file, used through `lopt.Tokenizer` directly. Output: the
dataset with `input_ids` and `offsets` (character offsets) beside `id`, saved with
`save_to_disk(OUT_DIR)`.

`datasets` caches each map result under a fingerprint that hashes the map function with dill,
tokenizer included: an unpicklable or non-deterministically pickled tokenizer gets a random
fingerprint and the cache is lost. lopt tokenizers (and accelerated transformers tokenizers)
pickle deterministically, so a second run with the same inputs reuses the cache: the printed
`fingerprint` is the same in every run.
"""

import argparse
import os
import sys
import time


def load(path):
    """Returns (batch of texts -> (input_ids, offsets)) for a model folder or a tokenizer.json."""
    import lopt

    if os.path.isdir(path) and os.path.exists(os.path.join(path, "tokenizer_config.json")):
        from transformers import AutoTokenizer

        tok = lopt.accelerate(AutoTokenizer.from_pretrained(path))

        def encode(texts):
            out = tok(texts, return_offsets_mapping=True)
            return out["input_ids"], out["offset_mapping"]

        return encode
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    tok = lopt.Tokenizer.from_file(path)

    def encode(texts):
        encodings = tok.encode_batch(texts)
        return [e.ids for e in encodings], [e.offsets for e in encodings]

    return encode


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="model folder, or a tokenizer.json")
    ap.add_argument("input", help="JSONL file: {\"id\": ..., \"text\": ...} per line")
    ap.add_argument("output", help="folder for save_to_disk")
    ap.add_argument("--num-proc", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    args = ap.parse_args(argv)

    import datasets

    encode = load(args.tokenizer)

    def tokenize(batch):
        input_ids, offsets = encode(batch["text"])
        return {"input_ids": input_ids, "offsets": offsets}

    start = time.perf_counter()
    docs = datasets.load_dataset("json", data_files=args.input, split="train")
    tokens = docs.map(
        tokenize,
        batched=True,
        batch_size=args.batch_size,
        num_proc=args.num_proc,
        remove_columns=[c for c in docs.column_names if c != "id"],
    )
    tokens.save_to_disk(args.output)
    elapsed = time.perf_counter() - start
    print(f"fingerprint {tokens._fingerprint}")
    print(f"wrote {len(tokens)} rows to {args.output} in {elapsed:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
