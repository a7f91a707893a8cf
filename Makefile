# Quick start: `make demo` (see lopt at work) and `make test` (everything CI checks).
# Both use only cargo, python3 and npm; fixtures come from ../shared or registry packages.

CARGO ?= cargo
# Extra flags for `lopt demo`, e.g. DEMO_ARGS="--threads 8 --bytes 8000000".
DEMO_ARGS ?=

.PHONY: demo test fixtures test-py

## demo: build the release binary and encode a ~3 MB generated text with the built-in tokenizer;
##       prints tokens, times and the speedup over HF's sequential encode (and checks equality).
demo:
	$(CARGO) run --release --quiet -p lopt-cli --bin lopt -- demo $(DEMO_ARGS)

## test: fixtures, cargo fmt --check, clippy -D warnings, cargo test --workspace, Python tests.
test:
	scripts/test.sh

## fixtures: fetch the fixture tokenizers when ../shared/tokenizers is absent.
fixtures:
	scripts/fetch-fixtures.sh

## test-py: the Python tests alone (skipped with a notice until lopt-py/ exists).
test-py:
	scripts/test.sh --python-only
