//! Architecture invariants, checked by `cargo test`.
//!
//! ARCHITECTURE.md states them; these tests keep them true.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

use crate::project_root;

/// Layers, bottom first. A crate may depend only on crates below it.
const LAYERS: &[&str] = &[
    "compaction-model",
    "compaction-tokens",
    "compaction-core",
    "compaction-hook",
    "compaction-adapters",
    "compaction-cli",
];

fn metadata() -> Value {
    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(project_root())
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

/// Normal (non-dev, non-build) dependencies of each workspace crate: name → (dependency, optional).
fn dependencies(metadata: &Value) -> BTreeMap<String, Vec<(String, bool)>> {
    let mut map = BTreeMap::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("name").to_owned();
        let deps = package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].is_null())
            .map(|d| {
                (d["name"].as_str().expect("dep name").to_owned(), d["optional"].as_bool().unwrap_or(false))
            })
            .collect();
        map.insert(name, deps);
    }
    map
}

#[test]
fn dependencies_point_down_the_layers() {
    let deps = dependencies(&metadata());
    for (position, krate) in LAYERS.iter().enumerate() {
        let Some(list) = deps.get(*krate) else { panic!("crate {krate} is missing from the workspace") };
        for (dep, _) in list {
            if let Some(dep_position) = LAYERS.iter().position(|l| l == dep) {
                assert!(
                    dep_position < position,
                    "Architecture Invariant broken: {krate} depends on {dep}, which is not below it"
                );
            }
        }
    }
}

#[test]
fn model_depends_only_on_serde_json_and_thiserror() {
    let deps = dependencies(&metadata());
    for (dep, _) in &deps["compaction-model"] {
        assert!(
            ["serde", "serde_json", "thiserror"].contains(&dep.as_str()),
            "Architecture Invariant broken: compaction-model depends on {dep}"
        );
    }
}

#[test]
fn tokenizer_libraries_only_behind_features() {
    let deps = dependencies(&metadata());
    for krate in ["compaction-tokens", "compaction-core", "compaction-hook"] {
        for (dep, optional) in &deps[krate] {
            if dep == "tiktoken-rs" || dep == "tokenizers" {
                assert!(*optional, "Architecture Invariant broken: {krate} pulls in {dep} without a feature");
            }
        }
    }
    // compaction-tokens must be used without its default features by core and hook, so that
    // a backend is compiled only where a user asks for one.
    let metadata = metadata();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().unwrap_or_default();
        if name != "compaction-core" && name != "compaction-hook" {
            continue;
        }
        for dep in package["dependencies"].as_array().expect("dependencies") {
            if dep["name"] == "compaction-tokens" && dep["kind"].is_null() {
                let features = dep["features"].as_array().map(Vec::len).unwrap_or(0);
                assert_eq!(
                    features, 0,
                    "Architecture Invariant broken: {name} turns on compaction-tokens features"
                );
            }
        }
    }
}

#[test]
fn core_and_hook_build_without_tokenizers() {
    // The resolved graph for core and hook alone, with default features, must not contain a
    // tokenizer library.
    for krate in ["compaction-core", "compaction-hook"] {
        let output = Command::new(env!("CARGO"))
            .args(["tree", "-p", krate, "-e", "normal", "--prefix", "none", "--offline"])
            .current_dir(project_root())
            .output()
            .expect("cargo tree runs");
        assert!(output.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&output.stderr));
        let tree = String::from_utf8_lossy(&output.stdout);
        for forbidden in ["tiktoken-rs", "tokenizers"] {
            assert!(
                !tree.lines().any(|l| l.starts_with(&format!("{forbidden} "))),
                "Architecture Invariant broken: {krate} pulls in {forbidden} with default features"
            );
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_doc_comment() {
    let mut missing = Vec::new();
    for dir in ["crates", "xtask/src", "benches"] {
        visit(&project_root().join(dir), &mut |path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
            if !first.starts_with("//!") {
                missing.push(path.display().to_string());
            }
        });
    }
    assert!(missing.is_empty(), "files without a `//!` header: {missing:?}");
}

#[test]
fn only_allowed_crates_do_io() {
    // compaction-model and compaction-core are pure: no file system, no network, no processes.
    for krate in ["compaction-model", "compaction-core"] {
        visit(&project_root().join("crates").join(krate).join("src"), &mut |path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for forbidden in ["std::fs", "std::net", "std::process", "File::"] {
                assert!(
                    !text.contains(forbidden),
                    "Architecture Invariant broken: {} uses {forbidden}",
                    path.display()
                );
            }
        });
    }
}

fn visit(dir: &std::path::Path, f: &mut dyn FnMut(&std::path::Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target" || n == "data") {
                continue;
            }
            visit(&path, f);
        } else if path.extension().is_some_and(|e| e == "rs") {
            f(&path);
        }
    }
}
