#!/usr/bin/env python3
"""Tokenize a JSONL corpus with Ray Data and lopt; write Parquet files with `id`, `input_ids` and
`offsets` (character offsets into the text, one `[start, end)` pair per token).

    python examples/ray_data_tokenize.py --tokenizer PATH IN.jsonl OUT_DIR

PATH is a tokenizer.json file or a folder holding one. Each input line is a JSON object with a
`text` field and an optional `id` (any JSON scalar, stored as a string; without one, the id is the
SHA-256 of the text). `ray.init()` starts a local Ray cluster, or joins the one that
`RAY_ADDRESS` names. Each actor builds its tokenizer once, from the tokenizer.json text that the
driver read (workers need no access to PATH), and encodes its batches on `--cpus-per-actor`
threads; by default one actor per CPU but one, so that the read and write tasks keep a CPU.

On a real cluster: give IN.jsonl and OUT_DIR as paths that every node sees (a shared file
system, or `s3://...`/`gs://...` with pyarrow's file systems), install lopt on every node (or ship
it with `--runtime-env-json '{"pip": ["lopt"]}'`), and submit from any machine:

    ray job submit --address http://HEAD:8265 --working-dir . -- \
        python examples/ray_data_tokenize.py --tokenizer tokenizer.json \
        --actors 32 --cpus-per-actor 4 s3://bucket/corpus.jsonl s3://bucket/tokens/
"""

import argparse
import hashlib
import os
import sys
import time


def read_tokenizer_json(path):
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        return f.read()


class Tokenize:
    """Ray Data callable class: one lopt tokenizer per actor, built in `__init__`."""

    def __init__(self, tokenizer_json, threads, add_special_tokens):
        import lopt

        self.tokenizer = lopt.Tokenizer.from_str(tokenizer_json, threads=threads)
        self.add_special_tokens = add_special_tokens

    def __call__(self, batch):
        import pyarrow as pa

        texts = batch.column("text").to_pylist()
        if "id" in batch.column_names:
            ids = [str(i) if i is not None else hashlib.sha256(t.encode()).hexdigest()
                   for i, t in zip(batch.column("id").to_pylist(), texts)]
        else:
            ids = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=self.add_special_tokens)
        return pa.table(
            {
                "id": pa.array(ids, pa.string()),
                "input_ids": pa.array([e.ids for e in encodings], pa.list_(pa.uint32())),
                "offsets": pa.array([[list(o) for o in e.offsets] for e in encodings],
                                    pa.list_(pa.list_(pa.int64(), 2))),
            }
        )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json, or a folder holding one")
    ap.add_argument("input", help="JSONL file (or folder of them): {\"id\": ..., \"text\": ...} per line")
    ap.add_argument("output", help="folder for the Parquet files")
    ap.add_argument("--actors", type=int, help="tokenizer actors (default: cluster CPUs - 1, at least 1)")
    ap.add_argument("--cpus-per-actor", type=int, default=1, help="CPUs (and lopt threads) per actor")
    ap.add_argument("--batch-size", type=int, default=64, help="documents per batch")
    ap.add_argument("--no-special-tokens", action="store_true", help="do not add BOS/EOS/CLS/SEP")
    args = ap.parse_args(argv)

    import ray

    tokenizer_json = read_tokenizer_json(args.tokenizer)
    ray.init()
    cpus = int(ray.cluster_resources().get("CPU", 1))
    actors = args.actors or max(1, (cpus - 1) // args.cpus_per_actor)

    start = time.perf_counter()
    docs = ray.data.read_json(args.input)
    tokens = docs.map_batches(
        Tokenize,
        fn_constructor_kwargs={
            "tokenizer_json": tokenizer_json,
            "threads": args.cpus_per_actor,
            "add_special_tokens": not args.no_special_tokens,
        },
        batch_size=args.batch_size,
        batch_format="pyarrow",
        concurrency=actors,
        num_cpus=args.cpus_per_actor,
    )
    tokens.write_parquet(args.output)
    elapsed = time.perf_counter() - start
    print(f"wrote {args.output} with {actors} actor(s) x {args.cpus_per_actor} CPU in {elapsed:.1f} s",
          file=sys.stderr)
    ray.shutdown()


if __name__ == "__main__":
    main()
