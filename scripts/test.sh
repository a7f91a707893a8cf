#!/usr/bin/env bash
# Everything CI checks, in order, failing fast: fixture tokenizers (fetched when ../shared is
# absent), `cargo fmt --check`, `cargo clippy --all-targets -D warnings`, `cargo test --workspace`,
# then the Python tests. `make test` and `.ci/run` run this; `--python-only` runs the last step.
# The Python venvs are installed in the background meanwhile (downloads and unpacking, which the
# compiler's two cores hardly notice); their log is target/py-venvs.log.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s (%ss elapsed)\n' "$*" "$SECONDS" >&2; }

VENV=target/py-venv
VENV4=target/py-venv-transformers4
VENVS_LOG=target/py-venvs.log

python_venvs() {
    # Pinned packages from PyPI (pip caches the wheels): the main venv, and transformers 4.57 in
    # a second one (`transformers4_tests`).
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r lopt-py/requirements-test.txt
    [ -x "$VENV4/bin/python" ] || python3 -m venv "$VENV4"
    "$VENV4/bin/python" -m pip install -q --disable-pip-version-check -r lopt-py/requirements-test-transformers4.txt
}

python_tests() {
    # The venvs (installed in the background unless `--python-only`), the wheel built once into
    # the main one, then pytest.
    if [ -n "${VENVS_PID:-}" ]; then
        step "Python: waiting for the venvs"
        wait "$VENVS_PID" || { cat "$VENVS_LOG" >&2; exit 1; }
        VENVS_PID=
    else
        step "Python: venvs"
        python_venvs
    fi
    step "Python: cargo fmt --check and clippy (lopt-py)"
    cargo fmt --manifest-path lopt-py/Cargo.toml --check
    CARGO_TARGET_DIR=target cargo clippy --manifest-path lopt-py/Cargo.toml --all-targets -- -D warnings
    # The release profile without its link-time optimization, and with debug assertions: the
    # tests check tokens, not speed. LTO was a large part of this build on 2 cores, and with debug
    # assertions the scanners are `#[inline]` instead of `inline(always)` (`lopt` and `lopt-py`
    # compile in 57 instead of 140 s on M3); the assertions then run under pytest too.
    step "Python: build the wheel (release, no LTO, debug assertions)"
    rm -rf target/py-wheels
    CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
        CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=false CARGO_TARGET_DIR=target \
        "$VENV/bin/maturin" build --quiet --release -m lopt-py/Cargo.toml \
        --interpreter "$VENV/bin/python" --out target/py-wheels
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
        target/py-wheels/lopt-*.whl
    step "pytest lopt-py/tests"
    "$VENV/bin/pytest" -q -n auto lopt-py/tests
    transformers4_tests
}

transformers4_tests() {
    # transformers 4.57 (`PreTrainedTokenizerFast`), with the newest tokenizers it accepts
    # (0.22.2: it asks for <=0.23.0, which exists only as a release candidate); the same wheel,
    # without its dependencies (it asks for tokenizers 0.23). A smaller tokenizer matrix.
    "$VENV4/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
        target/py-wheels/lopt-*.whl
    step "pytest lopt-py/tests (transformers 4.57)"
    LOPT_TRANSFORMERS_TOKENIZERS=qwen3,bert-base-uncased "$VENV4/bin/pytest" -q lopt-py/tests/test_transformers.py \
        lopt-py/tests/test_transformers_patch.py lopt-py/tests/test_vllm.py
}

if [ "${1:-}" = "--python-only" ]; then
    python_tests
    exit 0
fi

mkdir -p target
python_venvs >"$VENVS_LOG" 2>&1 &
VENVS_PID=$!
# A failing step stops the installs (pip is a child of the background shell).
trap '[ -z "${VENVS_PID:-}" ] || { pkill -P "$VENVS_PID"; kill "$VENVS_PID"; } 2>/dev/null || true' EXIT

step "fixtures"
scripts/fetch-fixtures.sh
step "cargo fmt --check"
cargo fmt --all --check
step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
step "cargo test"
cargo test --workspace
python_tests
step "all checks passed"
