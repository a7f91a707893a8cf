//! Where the unit tests find their data: `$LOPT_SHARED` when set, else `../shared` beside the
//! workspace (tokenizers, corpora), and fixture tokenizers also in `fixtures/tokenizers` (fetched
//! by `scripts/fetch-fixtures.sh` where `../shared` is absent), as `lopt-tests` looks for them.
//!
//! One place, so that every fixture test honours the same variable: a test that skips a missing
//! fixture with a notice passes without testing anything, which a checkout without `../shared`
//! beside it (a git worktree) otherwise met silently.

use std::path::PathBuf;

/// The shared folder: `$LOPT_SHARED`, else `../shared` beside the workspace.
pub(crate) fn shared() -> PathBuf {
    std::env::var_os("LOPT_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
}

/// The `tokenizer.json` of fixture `name`: under the shared folder, else under the workspace's
/// fetched `fixtures/tokenizers`; `None` when neither has it.
pub(crate) fn tokenizer_path(name: &str) -> Option<PathBuf> {
    let fetched = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tokenizers");
    [shared().join("tokenizers"), fetched]
        .into_iter()
        .map(|dir| dir.join(name).join("tokenizer.json"))
        .find(|path| path.is_file())
}
