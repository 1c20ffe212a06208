//! Which crates do I/O: the file system, the network and processes belong to compaction-offload
//! (stores), compaction-llm (the network) and the command; the others decide and hand back what
//! must be done. Checked in the dependency graph and in the sources.

use std::process::Command;

use serde_json::Value;

use super::{code_text, dependencies, metadata, visit};
use crate::project_root;

/// Crates that may not do network I/O: everything below compaction-llm, and the hook, which
/// reaches a model only through compaction-core's generator traits.
const NO_NETWORK: &[&str] = &[
    "compaction-model",
    "compaction-formats",
    "compaction-tokens",
    "compaction-core",
    "compaction-hook",
    "compaction-offload",
    "compaction-replay",
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
const NO_IO: &[&str] = &[
    "compaction-model",
    "compaction-formats",
    "compaction-tokens",
    "compaction-core",
    "compaction-hook",
    "compaction-replay",
];

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
            let code = code_text(path, &text).unwrap_or_else(|error| panic!("{error}"));
            for marker in IO_MARKERS {
                assert!(!code.contains(marker), "Architecture Invariant broken: {relative} uses {marker}");
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
        let code = code_text(path, &text).unwrap_or_else(|error| panic!("{error}"));
        for marker in &markers {
            assert!(!code.contains(marker), "Architecture Invariant broken: {relative} uses {marker}");
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
    // reach a store through it. The command uses rustix for one process setting (no transparent
    // huge pages), without its file-system calls.
    let metadata = metadata();
    for package in metadata["packages"].as_array().expect("packages") {
        if package["name"] != "compaction-cli" {
            continue;
        }
        for dep in package["dependencies"].as_array().expect("dependencies") {
            if dep["name"] == "rustix" {
                let features = dep["features"].as_array().expect("features");
                assert!(
                    dep["uses_default_features"] == false && !features.iter().any(|f| f == "fs"),
                    "Architecture Invariant broken: compaction-cli reaches the file system through rustix"
                );
            }
        }
    }
    let deps = dependencies(&metadata);
    for (krate, list) in &deps {
        if !matches!(krate.as_str(), "compaction-offload" | "compaction-cli")
            && krate.starts_with("compaction-")
        {
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
        let code = code_text(&src.join(file), &text).unwrap_or_else(|error| panic!("{error}"));
        for marker in IO_MARKERS {
            assert!(
                !code.contains(marker),
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
            let code = code_text(path, &text).unwrap_or_else(|error| panic!("{error}"));
            for forbidden in ["std::net", "TcpStream", "UdpSocket"] {
                assert!(
                    !code.contains(forbidden),
                    "Architecture Invariant broken: {} uses {forbidden}; network I/O belongs in compaction-llm",
                    path.display()
                );
            }
        });
    }
}

/// The markers a no-I/O crate's file is refused for, read from its code.
fn io_markers_in(path: &std::path::Path, text: &str) -> Vec<&'static str> {
    let code = code_text(path, text).unwrap_or_else(|error| panic!("{error}"));
    IO_MARKERS.iter().copied().filter(|marker| code.contains(marker)).collect()
}

#[test]
fn a_file_doing_io_is_caught_however_it_imports() {
    let path = std::path::Path::new("crates/compaction-core/src/example.rs");
    // A grouped import the line-by-line reading did not see, and a call inside a macro.
    let grouped = "//! Decides.\nuse std::{fs, io};\nfn f() { println!(\"{:?}\", fs::metadata(\"x\")); }\n";
    assert_eq!(io_markers_in(path, grouped), ["std::fs"]);
    let spawned = "//! Decides.\nfn f() { let _ = std::thread::spawn(|| ()); }\n";
    assert_eq!(io_markers_in(path, spawned), ["std::thread::spawn"]);
    let opened = "//! Decides.\nfn f() { vec![File::open(\"x\")]; }\n";
    assert_eq!(io_markers_in(path, opened), ["File::"]);
    // Docs, comments and strings are not code.
    let talks = "//! The caller reads with `std::fs::read`.\n// tokio\nconst S: &str = \"OpenOptions\";\n";
    assert!(io_markers_in(path, talks).is_empty());
}
