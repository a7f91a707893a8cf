"""Threads, the GIL and fork: one tokenizer shared by 8 Python threads with different settings,
the GIL released while lopt encodes, and a process forked after lopt used its thread pool."""

from __future__ import annotations

import os
import threading
import time

import pytest

import lopt
from conftest import FIXTURES, corpus_samples, generated_text, load_pair


def long_text(size: int = 400_000) -> str:
    parts, total = [], 0
    for _, text in corpus_samples():
        parts.append(text)
        total += len(text)
    text = "\n".join(parts) or generated_text(1, size)
    while len(text) < size:
        text += "\n" + text
    return text[:size]


def test_eight_threads_with_different_settings_share_one_tokenizer():
    ours, theirs = load_pair(FIXTURES[0])
    batch = [text[:2000] for _, text in corpus_samples()[:4]] + ["short text", ""]
    pair = (batch[0][:300], batch[1][:300])

    def settings(i: int):
        truncation = dict(max_length=8 + 5 * i, stride=i % 3, direction="left" if i % 2 else "right")
        padding = dict(length=None if i % 3 else 80, direction="left" if i % 4 == 1 else "right")
        return truncation, padding

    # Threads set truncation and padding one after the other, so a call may see any thread's
    # truncation with any thread's padding (or none): the references are every combination.
    truncations = [settings(i)[0] for i in range(8)] + [None]
    paddings = [settings(i)[1] for i in range(8)] + [None]
    references = set()
    for truncation in truncations:
        for padding in paddings:
            theirs.no_truncation() if truncation is None else theirs.enable_truncation(**truncation)
            theirs.no_padding() if padding is None else theirs.enable_padding(**padding)
            references.add(
                (
                    tuple(tuple(e.ids) for e in theirs.encode_batch(batch)),
                    tuple(theirs.encode(batch[0]).ids),
                    tuple(theirs.encode(*pair).ids),
                )
            )
    batches = {ref[0] for ref in references}
    singles = {ref[1] for ref in references}
    pairs_ = {ref[2] for ref in references}
    errors: "list[BaseException]" = []
    barrier = threading.Barrier(8)

    def work(i: int) -> None:
        try:
            truncation, padding = settings(i)
            barrier.wait()
            for _ in range(6):
                ours.enable_truncation(**truncation)
                ours.enable_padding(**padding)
                got_batch = tuple(tuple(e.ids) for e in ours.encode_batch(batch))
                got_single = tuple(ours.encode(batch[0]).ids)
                got_pair = tuple(ours.encode(*pair).ids)
                # Other threads change the shared settings meanwhile: each call must give the
                # result of one consistent set of settings, never a mix within a call or an error.
                assert got_batch in batches
                assert got_single in singles
                assert got_pair in pairs_
                ours.no_truncation()
                ours.no_padding()
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


@pytest.mark.parametrize("call", ["encode", "encode_batch", "encode_ids"])
def test_gil_is_released_while_encoding(call):
    ours, _ = load_pair(FIXTURES[0], threads=1)
    text = long_text()
    ticks: "list[float]" = []
    done = threading.Event()

    def ticker() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0005)

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        while len(ticks) < 3:
            time.sleep(0.001)
        for _ in range(3):
            start = time.perf_counter()
            if call == "encode_batch":
                ours.encode_batch([text])
            else:
                getattr(ours, call)(text)
            end = time.perf_counter()
            during = [t for t in ticks if start < t < end]
            if len(during) >= 3:
                return
        pytest.fail(f"the ticker thread made no progress during {call}: the GIL was held")
    finally:
        done.set()
        thread.join()


def wait_for(pid: int, seconds: float = 300.0) -> int:
    """The child's exit status; kills it and fails when it hangs (a deadlock)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung (deadlock after fork)")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_after_the_pool_was_used():
    ours, _ = load_pair(FIXTURES[0], threads=2)
    text = long_text(100_000)
    want = ours.encode(text).ids  # uses the pool (over the parallel threshold)
    busy = threading.Thread(target=lambda: ours.encode(text, text[:1000]))  # holds the lock (HF)
    busy.start()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            ok = ours.encode(text).ids == want and ours.encode_batch([text])[0].ids == want
            ok = ok and isinstance(ours.decode(want[:10]), str)
            code = 0 if ok else 1
        finally:
            os._exit(code)
    busy.join()
    assert wait_for(pid) == 0
    assert ours.encode(text).ids == want  # the parent is unaffected
