#!/usr/bin/env bash
# Everything CI checks, in order, failing fast: fixture tokenizers (fetched when ../shared is
# absent), `cargo fmt --check`, `cargo clippy --all-targets -D warnings`, `cargo test --workspace`,
# then the Python tests. `make test` and `.ci/run` run this; `--python-only` runs the last step.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s (%ss elapsed)\n' "$*" "$SECONDS" >&2; }

python_tests() {
    # The Python package: a venv under target/ (pinned packages from PyPI; pip caches the
    # wheels), the wheel built once in release mode into it, then pytest.
    local venv=target/py-venv
    step "Python: venv $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r lopt-py/requirements-test.txt
    step "Python: cargo fmt --check and clippy (lopt-py)"
    cargo fmt --manifest-path lopt-py/Cargo.toml --check
    CARGO_TARGET_DIR=target cargo clippy --manifest-path lopt-py/Cargo.toml --all-targets -- -D warnings
    step "Python: build the wheel (release)"
    rm -rf target/py-wheels
    CARGO_TARGET_DIR=target "$venv/bin/maturin" build --quiet --release -m lopt-py/Cargo.toml \
        --interpreter "$venv/bin/python" --out target/py-wheels
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
        target/py-wheels/lopt-*.whl
    step "pytest lopt-py/tests"
    "$venv/bin/pytest" -q lopt-py/tests
    transformers4_tests
}

transformers4_tests() {
    # transformers 4.57 (`PreTrainedTokenizerFast`) in a second venv, with the newest tokenizers it
    # accepts (0.22.2: it asks for <=0.23.0, which exists only as a release candidate); the same
    # wheel, without its dependencies (it asks for tokenizers 0.23). A smaller tokenizer matrix.
    local venv=target/py-venv-transformers4
    step "Python: venv $venv (transformers 4.57)"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r lopt-py/requirements-test-transformers4.txt
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps \
        target/py-wheels/lopt-*.whl
    step "pytest lopt-py/tests (transformers 4.57)"
    LOPT_TRANSFORMERS_TOKENIZERS=qwen3,bert-base-uncased "$venv/bin/pytest" -q lopt-py/tests/test_transformers.py \
        lopt-py/tests/test_transformers_patch.py lopt-py/tests/test_vllm.py
}

if [ "${1:-}" = "--python-only" ]; then
    python_tests
    exit 0
fi

step "fixtures"
scripts/fetch-fixtures.sh
step "cargo fmt --check"
cargo fmt --all --check
step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
step "cargo test"
cargo test --workspace
step "cargo test: the BPE differential suite on the pre-tokenizer's scalar path"
cargo test -p lopt-tests --test native_bpe --features scalar-pretok
python_tests
step "all checks passed"
