#!/usr/bin/env bash
# Everything CI checks, in order, failing fast: fixture tokenizers (fetched when ../shared is
# absent), `cargo fmt --check`, `cargo clippy --all-targets -D warnings`, `cargo test --workspace`,
# then the Python tests. `make test` and `.ci/run` run this; `--python-only` runs the last step.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n== %s (%ss elapsed)\n' "$*" "$SECONDS" >&2; }

python_tests() {
    # Hook for the Python binding: once lopt-py/ has tests, build it and run pytest here.
    if [ -d lopt-py/tests ]; then
        step "pytest lopt-py/tests"
        python3 -m pytest -q lopt-py/tests
    else
        step "NOTICE: no lopt-py/tests yet; Python tests skipped"
    fi
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
python_tests
step "all checks passed"
