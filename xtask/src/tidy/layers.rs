//! The crates' dependency direction: the layers, the crates beside them, the DAG (dev-dependencies
//! included), and who may depend on testkit, formats and the tokenizer libraries.

use std::collections::BTreeMap;
use std::process::Command;

use super::{dependencies, metadata};
use crate::project_root;

/// Layers, bottom first. A crate may depend only on crates below it.
pub(super) const LAYERS: &[&str] = &[
    "compaction-json",
    "compaction-model",
    "compaction-tokens",
    "compaction-core",
    "compaction-llm",
    "compaction-hook",
    "compaction-offload",
    "compaction-replay",
    "compaction-adapters",
    "compaction-proxy",
    "compaction-cli",
];

/// Workspace crates outside the layers, and why.
pub(super) const BESIDE_THE_LAYERS: &[(&str, &str)] = &[
    ("compaction-formats", "transcripts: depends only on the model, used only by the command and the proxy"),
    ("compaction-testkit", "test helpers: a dev-dependency only, depending on nothing of ours"),
    ("compaction-benches", "benchmarks: a leaf, nothing depends on it"),
    ("compaction-python", "the Python package (PyO3): a leaf over the library crates"),
    ("xtask", "the project's tasks: a leaf, nothing depends on it"),
];
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

/// Every workspace crate is in the layers or named beside them with its reason, so no new crate
/// escapes the direction check.
#[test]
fn every_crate_has_a_place() {
    let metadata = metadata();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("name");
        assert!(
            LAYERS.contains(&name) || BESIDE_THE_LAYERS.iter().any(|(beside, _)| *beside == name),
            "crate {name} is neither in xtask/src/tidy/layers.rs's LAYERS nor beside them: place it (and in ARCHITECTURE.md's map)"
        );
    }
}

/// The crates form a DAG, counting dev-dependencies too: a test that depends on a crate which
/// depends back on the tested one compiles two copies of it, whose types do not match.
#[test]
fn the_crates_form_a_dag_dev_dependencies_included() {
    let metadata = metadata();
    let ours: Vec<&str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("name");
        let deps = package["dependencies"].as_array().expect("dependencies");
        let targets =
            deps.iter().filter_map(|d| d["name"].as_str()).filter(|d| ours.contains(d) && *d != name);
        edges.entry(name).or_default().extend(targets);
    }
    // Depth-first search; a crate met again while still on the path closes a cycle.
    fn visit<'a>(
        node: &'a str,
        edges: &BTreeMap<&'a str, Vec<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut Vec<&'a str>,
    ) {
        if done.contains(&node) {
            return;
        }
        if let Some(at) = path.iter().position(|n| *n == node) {
            panic!(
                "Architecture Invariant broken: the crates depend in a cycle: {} -> {node}",
                path[at..].join(" -> ")
            );
        }
        path.push(node);
        for next in edges.get(node).into_iter().flatten() {
            visit(next, edges, path, done);
        }
        path.pop();
        done.push(node);
    }
    let mut done = Vec::new();
    for node in edges.keys() {
        visit(node, &edges, &mut Vec::new(), &mut done);
    }
}

/// compaction-testkit is for tests only: no crate depends on it outside its dev-dependencies,
/// and it depends on nothing of ours, so every crate's tests can use it.
#[test]
fn testkit_is_a_dev_dependency_that_depends_on_nothing_of_ours() {
    let deps = dependencies(&metadata());
    for (krate, list) in &deps {
        assert!(
            !list.iter().any(|(dep, _)| dep == "compaction-testkit"),
            "Architecture Invariant broken: {krate} depends on compaction-testkit outside its dev-dependencies"
        );
    }
    // compaction-json, at the bottom and testing with nothing of ours, spells fixtures as Python.
    for (dep, _) in &deps["compaction-testkit"] {
        assert!(
            !dep.starts_with("compaction-") || dep == "compaction-json",
            "Architecture Invariant broken: compaction-testkit depends on {dep}"
        );
    }
}

/// compaction-formats sits beside the stack: it needs messages only, and only the command and the
/// proxy (which reads and writes requests as conversations) use it.
#[test]
fn formats_depends_only_on_the_model_and_only_the_command_depends_on_it() {
    let deps = dependencies(&metadata());
    let Some(formats) = deps.get("compaction-formats") else { panic!("compaction-formats is missing") };
    for (dep, _) in formats {
        assert!(
            !dep.starts_with("compaction-") || dep == "compaction-model" || dep == "compaction-json",
            "Architecture Invariant broken: compaction-formats depends on {dep}"
        );
    }
    for krate in LAYERS.iter().filter(|krate| !["compaction-proxy", "compaction-cli"].contains(krate)) {
        assert!(
            !deps[*krate].iter().any(|(dep, _)| dep == "compaction-formats"),
            "Architecture Invariant broken: {krate} depends on compaction-formats"
        );
    }
}

#[test]
fn model_depends_only_on_serde_json_thiserror_and_simdutf8() {
    // simdutf8, a leaf with no dependencies of its own, checks string contents as UTF-8.
    let deps = dependencies(&metadata());
    for (dep, _) in &deps["compaction-model"] {
        assert!(
            ["compaction-json", "serde", "serde_json", "thiserror", "simdutf8"].contains(&dep.as_str()),
            "Architecture Invariant broken: compaction-model depends on {dep}"
        );
    }
}

#[test]
fn tokenizer_libraries_only_behind_features() {
    let deps = dependencies(&metadata());
    for krate in ["compaction-tokens", "compaction-core", "compaction-hook", "compaction-offload"] {
        for (dep, optional) in &deps[krate] {
            if dep == "tiktoken-rs" || dep == "tokenizers" {
                assert!(*optional, "Architecture Invariant broken: {krate} pulls in {dep} without a feature");
            }
        }
    }
    // compaction-tokens must be used without its default features by core, hook and offload,
    // so that a backend is compiled only where a user asks for one.
    let metadata = metadata();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().unwrap_or_default();
        if !["compaction-core", "compaction-hook", "compaction-offload"].contains(&name) {
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
fn core_hook_and_offload_build_without_tokenizers() {
    // The resolved graph for core, hook and offload alone, with default features, must not
    // contain a tokenizer library.
    for krate in ["compaction-core", "compaction-hook", "compaction-offload"] {
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
