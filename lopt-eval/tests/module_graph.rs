//! The crate's modules import one way: the graph of `crate::...` and `super::...` paths between
//! its source files has no cycle (no module imports one that imports it, directly or through
//! others). Test modules (`#[cfg(test)]` and below) and comments are not imports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` is `a::b`, `src/a/mod.rs` is `a`, `src/main.rs` is the crate root ``.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "main" | "lib")) {
        parts.pop();
    }
    parts.join("::")
}

/// The paths a line names after `crate::` or `super::`, braces expanded one level
/// (`crate::a::{b, c}` names `a::b` and `a::c`), `super` resolved against `module`.
fn named_paths(line: &str, module: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent(module))] {
        for (at, _) in line.match_indices(prefix) {
            let before = line[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &line[at + prefix.len()..];
            let mut path = base.clone();
            let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            path.extend(rest[..end].split("::").filter(|s| !s.is_empty()).map(str::to_owned));
            if rest[end..].starts_with('{') {
                let group = rest[end + 1..].split('}').next().unwrap_or("");
                for item in group.split(',') {
                    let head = item.trim().split("::").next().unwrap_or("").to_owned();
                    let mut p = path.clone();
                    p.push(head);
                    out.push(p);
                }
            } else {
                out.push(path);
            }
        }
    }
    out
}

fn parent(module: &str) -> Vec<String> {
    let mut parts: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect();
    parts.pop();
    parts
}

/// The longest prefix of `path` that is a module of the crate.
fn resolve(path: &[String], modules: &[String]) -> Option<String> {
    (1..=path.len()).rev().map(|n| path[..n].join("::")).find(|m| modules.contains(m))
}

#[test]
fn modules_import_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: Vec<String> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut edges: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (file, module) in files.iter().zip(&modules) {
        let text = std::fs::read_to_string(file).expect("readable source");
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for path in named_paths(line, module) {
                if let Some(target) = resolve(&path, &modules) {
                    if &target != module {
                        edges.entry(module.clone()).or_default().push(target);
                    }
                }
            }
        }
    }
    assert!(edges.get("methods").is_some_and(|e| e.iter().any(|t| t.starts_with("baselines"))), "{edges:?}");
    // Depth-first search for a cycle: 1 = on the current path, 2 = done.
    fn visit(m: &str, edges: &BTreeMap<String, Vec<String>>, state: &mut BTreeMap<String, u8>, path: &mut Vec<String>) {
        match state.get(m) {
            Some(2) => return,
            Some(1) => panic!("modules import each other in a circle: {} -> {m}", path.join(" -> ")),
            _ => {}
        }
        state.insert(m.to_owned(), 1);
        path.push(m.to_owned());
        for t in edges.get(m).into_iter().flatten() {
            visit(t, edges, state, path);
        }
        path.pop();
        state.insert(m.to_owned(), 2);
    }
    let mut state = BTreeMap::new();
    for m in &modules {
        visit(m, &edges, &mut state, &mut Vec::new());
    }
}

#[test]
fn named_paths_expand_groups_and_super() {
    let p = named_paths("use crate::baselines::{delim, overlap::x};", "methods");
    assert_eq!(p, vec![vec!["baselines", "delim"], vec!["baselines", "overlap"]]);
    assert_eq!(named_paths("use super::splice;", "baselines::paper"), vec![vec!["baselines", "splice"]]);
    assert_eq!(named_paths("x.map_err(crate::output::hf_err)", "a"), vec![vec!["output", "hf_err"]]);
}
