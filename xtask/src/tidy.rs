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
    "compaction-llm",
    "compaction-hook",
    "compaction-offload",
    "compaction-adapters",
    "compaction-cli",
];

/// Workspace crates outside the layers, and why.
const BESIDE_THE_LAYERS: &[(&str, &str)] = &[
    ("compaction-formats", "transcripts: depends only on the model, used only by the command"),
    ("compaction-testkit", "test helpers: a dev-dependency only, depending on nothing of ours"),
    ("compaction-benches", "benchmarks: a leaf, nothing depends on it"),
    ("xtask", "the project's tasks: a leaf, nothing depends on it"),
];

/// Crates that may not do network I/O: everything below compaction-llm, and the hook, which
/// reaches a model only through compaction-core's generator traits.
const NO_NETWORK: &[&str] = &[
    "compaction-model",
    "compaction-formats",
    "compaction-tokens",
    "compaction-core",
    "compaction-hook",
    "compaction-offload",
];

/// HTTP clients and TLS stacks: pulling one in is doing network I/O.
const NETWORK_LIBRARIES: &[&str] = &[
    "reqwest",
    "ureq",
    "hyper",
    "h2",
    "isahc",
    "curl",
    "attohttpc",
    "minreq",
    "surf",
    "rustls",
    "native-tls",
    "openssl",
];

/// Library crates that do no I/O: they decide, and whoever calls them reads and writes.
const NO_IO: &[&str] =
    &["compaction-model", "compaction-formats", "compaction-tokens", "compaction-core", "compaction-hook"];

/// The one place in a no-I/O crate allowed to read a file, and why.
const IO_EXCEPTIONS: &[(&str, &str)] = &[(
    "crates/compaction-tokens/src/huggingface.rs",
    "loads the tokenizer.json the user names, behind the `huggingface` feature",
)];

/// What in a source file means I/O: the file system, the network, processes, and the crates
/// that reach them.
const IO_MARKERS: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "File::",
    "OpenOptions",
    "TcpStream",
    "rustix",
    "tokio",
    "std::os::",
    "std::thread::spawn",
];

/// Crates that do I/O, which a no-I/O crate must not depend on.
const IO_CRATES: &[&str] =
    &["rustix", "libc", "tokio", "async-std", "cap-std", "reqwest", "ureq", "hyper", "tempfile"];

/// compaction-adapters' dependencies that do I/O, which only its `examples` feature (not for
/// users) may turn on, for the runnable examples' runtime, server and store.
const ADAPTERS_EXAMPLES_ONLY: &[&str] = &["tokio", "rustls", "compaction-offload"];

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

/// Every workspace crate is in the layers or named beside them with its reason, so no new crate
/// escapes the direction check.
#[test]
fn every_crate_has_a_place() {
    let metadata = metadata();
    for package in metadata["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("name");
        assert!(
            LAYERS.contains(&name) || BESIDE_THE_LAYERS.iter().any(|(beside, _)| *beside == name),
            "crate {name} is neither in tidy.rs's LAYERS nor beside them: place it (and in ARCHITECTURE.md's map)"
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
    for (dep, _) in &deps["compaction-testkit"] {
        assert!(
            !dep.starts_with("compaction-"),
            "Architecture Invariant broken: compaction-testkit depends on {dep}"
        );
    }
}

/// compaction-formats sits beside the stack: it needs messages only, and only the command uses it.
#[test]
fn formats_depends_only_on_the_model_and_only_the_command_depends_on_it() {
    let deps = dependencies(&metadata());
    let Some(formats) = deps.get("compaction-formats") else { panic!("compaction-formats is missing") };
    for (dep, _) in formats {
        assert!(
            !dep.starts_with("compaction-") || dep == "compaction-model",
            "Architecture Invariant broken: compaction-formats depends on {dep}"
        );
    }
    for krate in &LAYERS[..LAYERS.len() - 1] {
        assert!(
            !deps[*krate].iter().any(|(dep, _)| dep == "compaction-formats"),
            "Architecture Invariant broken: {krate} depends on compaction-formats"
        );
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
fn model_formats_tokens_core_and_hook_do_no_io() {
    // No file system, network or processes in their sources, but for the named exception.
    for krate in NO_IO {
        visit(&project_root().join("crates").join(krate).join("src"), &mut |path| {
            let relative =
                path.strip_prefix(project_root()).unwrap_or(path).to_string_lossy().replace('\\', "/");
            if IO_EXCEPTIONS.iter().any(|(file, _)| *file == relative) {
                return;
            }
            let text = std::fs::read_to_string(path).unwrap_or_default();
            // Doc examples may show the caller reading a file; only code counts.
            let code: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
            for marker in IO_MARKERS {
                assert!(
                    !code.iter().any(|line| line.contains(marker)),
                    "Architecture Invariant broken: {relative} uses {marker}"
                );
            }
        });
    }
    // Nor do they depend on a crate that does.
    let deps = dependencies(&metadata());
    for krate in NO_IO {
        for (dep, _) in &deps[*krate] {
            assert!(
                !IO_CRATES.contains(&dep.as_str()),
                "Architecture Invariant broken: {krate} depends on {dep}"
            );
        }
    }
}

#[test]
fn adapters_library_does_no_io() {
    // Its sources convert and compact: no file system, network, processes or runtime, and no
    // framework client is called.
    let markers: Vec<&str> = IO_MARKERS.iter().copied().chain(["reqwest", "hyper", "ureq"]).collect();
    visit(&project_root().join("crates/compaction-adapters/src"), &mut |path| {
        let relative = path.strip_prefix(project_root()).unwrap_or(path).display().to_string();
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let code: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
        for marker in &markers {
            assert!(
                !code.iter().any(|line| line.contains(marker)),
                "Architecture Invariant broken: {relative} uses {marker}"
            );
        }
    });
    let metadata = metadata();
    let package = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "compaction-adapters")
        .expect("compaction-adapters is in the workspace");
    // Its own dependencies do no I/O, but for those only the examples turn on.
    for dep in package["dependencies"].as_array().expect("dependencies") {
        let (name, optional) =
            (dep["name"].as_str().unwrap_or_default(), dep["optional"].as_bool().unwrap_or(false));
        if dep["kind"].is_null() && !optional {
            assert!(
                !IO_CRATES.contains(&name) && !ADAPTERS_EXAMPLES_ONLY.contains(&name),
                "Architecture Invariant broken: compaction-adapters depends on {name}"
            );
        }
    }
    // Only the `examples` feature turns those on, or a framework's HTTP client.
    for (feature, enables) in package["features"].as_object().expect("features") {
        if feature == "examples" {
            continue;
        }
        for enabled in enables.as_array().expect("feature list").iter().filter_map(Value::as_str) {
            let dep = enabled.strip_prefix("dep:").unwrap_or(enabled);
            assert!(
                !ADAPTERS_EXAMPLES_ONLY.contains(&dep) && !enabled.contains('/'),
                "Architecture Invariant broken: compaction-adapters' feature `{feature}` turns on `{enabled}`, which only the examples may"
            );
        }
    }
}

#[test]
fn offload_owns_store_io_and_decides_without_it() {
    // Only compaction-offload reaches the file system through rustix; the other library crates
    // reach a store through it.
    let deps = dependencies(&metadata());
    for (krate, list) in &deps {
        if krate != "compaction-offload" && krate.starts_with("compaction-") {
            assert!(
                !list.iter().any(|(dep, _)| dep == "rustix"),
                "Architecture Invariant broken: {krate} does store I/O of its own"
            );
        }
    }
    // Inside it, the store's system calls live in the store modules; the hook, the compactor,
    // the plans and the policies only decide (sans-IO), and the caller commits.
    let src = project_root().join("crates/compaction-offload/src");
    for file in
        ["offload_hook.rs", "offload_compactor.rs", "blocks.rs", "plan.rs", "policy.rs", "read_tool.rs"]
    {
        let text = std::fs::read_to_string(src.join(file)).expect("offload source file");
        for marker in IO_MARKERS {
            assert!(
                !text.contains(marker),
                "Architecture Invariant broken: compaction-offload/src/{file} uses {marker}"
            );
        }
    }
}

#[test]
fn only_compaction_llm_does_network_io() {
    for krate in NO_NETWORK {
        // With every feature on: no feature of these crates may bring a network stack either.
        let output = Command::new(env!("CARGO"))
            .args(["tree", "-p", krate, "-e", "normal", "--all-features", "--prefix", "none", "--offline"])
            .current_dir(project_root())
            .output()
            .expect("cargo tree runs");
        assert!(output.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&output.stderr));
        let tree = String::from_utf8_lossy(&output.stdout);
        for library in NETWORK_LIBRARIES {
            assert!(
                !tree.lines().any(|l| l.starts_with(&format!("{library} "))),
                "Architecture Invariant broken: {krate} pulls in {library}; network I/O belongs in compaction-llm"
            );
        }
        visit(&project_root().join("crates").join(krate).join("src"), &mut |path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for forbidden in ["std::net", "TcpStream", "UdpSocket"] {
                assert!(
                    !text.contains(forbidden),
                    "Architecture Invariant broken: {} uses {forbidden}; network I/O belongs in compaction-llm",
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
