//! The module layers of `docs/src/design.md` §7: every `crate::` path in
//! `src/` points to a module of the same or a lower layer, and two modules
//! of one layer never use each other (no cycle). Reads the source as text
//! (comment lines are skipped, so doc links may point anywhere); needs no
//! database.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and its layer, lowest first. A module
/// may use the modules of its own and lower layers.
const LAYERS: &[(&str, u8)] = &[
    ("position", 0),
    ("mysql", 0),
    ("backoff", 0),
    ("memory", 0),
    ("catalog", 1),
    ("event", 2),
    ("config", 2),
    ("shard", 2),
    ("xa", 2),
    ("inspect", 3),
    ("grants", 3),
    ("extractor", 3),
    ("queue", 3),
    ("replica", 4),
    ("check", 4),
    ("scheduler", 4),
    ("applier", 4),
    ("replicator", 5),
    ("control", 6),
    ("bin", 7),
    ("lib", 8),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules each top-level module names with `crate::`,
/// with the files that name them.
fn uses() -> BTreeMap<(String, String), BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let top = rel.split('/').next().unwrap().trim_end_matches(".rs");
        let text = std::fs::read_to_string(&file).unwrap();
        let code: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect();
        let code = code.join("\n");
        let mut named = BTreeSet::new();
        for (at, _) in code.match_indices("crate::") {
            let rest = &code[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a, b::c}`: every first segment.
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for item in group.split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    named.insert(name);
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                named.insert(name);
            }
        }
        for name in named {
            if !name.is_empty() && name != top {
                edges
                    .entry((top.to_string(), name))
                    .or_default()
                    .insert(rel.clone());
            }
        }
    }
    edges
}

/// What breaks the layering in `edges`, one line each.
fn violations(edges: &BTreeMap<(String, String), BTreeSet<String>>) -> Vec<String> {
    let mut wrong = Vec::new();
    for ((from, to), files) in edges {
        let (Some(lf), Some(lt)) = (layer(from), layer(to)) else {
            wrong.push(format!(
                "{from} -> {to}: a module without a layer in tests/layers.rs ({files:?})"
            ));
            continue;
        };
        if lt > lf {
            wrong.push(format!(
                "{from} (layer {lf}) uses {to} (layer {lt}), a higher layer: {files:?}"
            ));
        } else if lt == lf && edges.contains_key(&(to.clone(), from.clone())) {
            wrong.push(format!(
                "{from} and {to} (layer {lf}) use each other: {files:?}"
            ));
        }
    }
    wrong
}

#[test]
fn imports_point_down_the_layers() {
    let edges = uses();
    assert!(
        edges.len() > 40,
        "the source was not read: {} uses",
        edges.len()
    );
    // Known uses, so a parse that finds nothing cannot pass.
    assert!(edges.contains_key(&("control".into(), "replicator".into())));
    assert!(edges.contains_key(&("applier".into(), "catalog".into())));
    let wrong = violations(&edges);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn upward_uses_and_cycles_are_found() {
    let edge = |a: &str, b: &str| {
        (
            (a.to_string(), b.to_string()),
            BTreeSet::from(["f.rs".to_string()]),
        )
    };
    let edges = BTreeMap::from([
        edge("replicator", "control"),
        edge("scheduler", "applier"),
        edge("applier", "scheduler"),
        edge("queue", "event"),
        edge("queue", "nowhere"),
    ]);
    assert_eq!(
        violations(&edges),
        [
            "applier and scheduler (layer 4) use each other: {\"f.rs\"}",
            "queue -> nowhere: a module without a layer in tests/layers.rs ({\"f.rs\"})",
            "replicator (layer 5) uses control (layer 6), a higher layer: {\"f.rs\"}",
            "scheduler and applier (layer 4) use each other: {\"f.rs\"}",
        ]
    );
}
