//! Architecture invariants, checked by `cargo test`.
//!
//! ARCHITECTURE.md states them; these tests keep them true.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

use crate::project_root;

/// Layers, bottom first. A crate may depend only on crates below it.
const LAYERS: &[&str] = &[
    "compaction-json",
    "compaction-model",
    "compaction-tokens",
    "compaction-core",
    "compaction-llm",
    "compaction-hook",
    "compaction-offload",
    "compaction-replay",
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
    // compaction-json, at the bottom and testing with nothing of ours, spells fixtures as Python.
    for (dep, _) in &deps["compaction-testkit"] {
        assert!(
            !dep.starts_with("compaction-") || dep == "compaction-json",
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
            !dep.starts_with("compaction-") || dep == "compaction-model" || dep == "compaction-json",
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

// ---------------------------------------------------------------------------------------------
// The public surface: each library crate's count of public items, against a budget raised only
// on purpose. Growing a crate's API is then a visible line in the same change.

/// Public items per library crate, as [`count_public_items`] counts them over the crate's `src`.
/// A crate whose count differs fails `public_items_stay_within_their_budget`: raise the number
/// in the change that adds items (and say what they are in CHANGELOG.md), or lower it in the
/// change that removes some, so the next addition is seen.
const PUBLIC_ITEM_BUDGET: &[(&str, usize)] = &[
    ("compaction-json", 53),
    ("compaction-model", 98),
    ("compaction-formats", 52),
    ("compaction-tokens", 56),
    ("compaction-core", 157),
    ("compaction-llm", 74),
    ("compaction-hook", 76),
    ("compaction-offload", 110),
    ("compaction-replay", 49),
    ("compaction-adapters", 40),
];

/// Counts the items a crate's source declares plainly `pub`: functions, structs, enums, traits,
/// type aliases, constants, statics and modules, wherever they sit (inherent and free), leaving
/// out `pub(crate)` and narrower, re-exports (`pub use`, which name items counted where they are
/// declared), doc comments, and `#[cfg(test)]` modules.
///
/// A source count rather than rustdoc's: rustdoc's JSON output needs a nightly toolchain. It
/// also counts a `pub` item inside a private module that nothing re-exports; such an item is
/// one re-export away from the surface, so it belongs in the budget too.
fn count_public_items(source: &str) -> usize {
    const KINDS: &[&str] = &["fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union"];
    // What may stand between `const` and `fn` in `pub const unsafe fn` and the like.
    const QUALIFIERS: &[&str] = &["fn", "async", "unsafe", "extern"];
    let mut count = 0;
    let mut test_module_depth: Option<i64> = None;
    let mut depth = 0i64;
    let mut cfg_test_pending = false;
    for line in source.lines() {
        let code = strip_literals_and_comments(line);
        let trimmed = code.trim();
        let opens = code.matches('{').count() as i64;
        let closes = code.matches('}').count() as i64;
        if let Some(start) = test_module_depth {
            depth += opens - closes;
            if depth <= start {
                test_module_depth = None;
            }
            continue;
        }
        if trimmed == "#[cfg(test)]" {
            cfg_test_pending = true;
            continue;
        }
        if cfg_test_pending && !trimmed.starts_with("#[") {
            cfg_test_pending = false;
            if trimmed.starts_with("mod ") || trimmed.starts_with("pub mod ") {
                if opens > closes {
                    test_module_depth = Some(depth);
                    depth += opens - closes;
                }
                continue;
            }
        }
        depth += opens - closes;
        let Some(rest) = trimmed.strip_prefix("pub ") else { continue };
        let mut words =
            rest.split_whitespace().map(|w| w.trim_end_matches(['{', '(', '<', ':', ';'])).peekable();
        loop {
            match words.next() {
                Some("const") if words.peek().is_some_and(|next| QUALIFIERS.contains(next)) => {}
                Some("async" | "unsafe") => {}
                Some("extern") => {
                    // The ABI string (`extern "C" fn`) belongs to the qualifier.
                    if words.peek().is_some_and(|next| next.starts_with('"')) {
                        words.next();
                    }
                }
                Some(kind) => {
                    if KINDS.contains(&kind) {
                        count += 1;
                    }
                    break;
                }
                None => break,
            }
        }
    }
    count
}

/// `line` with string and character literals emptied and any `//` comment cut off, so that
/// braces and keywords inside them are not read as code. Raw strings and literals spanning
/// lines are not tracked; the crates' sources keep braces out of those.
fn strip_literals_and_comments(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push('"');
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push('"');
            }
            // A character literal ('{', '\'', '\u{7b}'); a lifetime ('a) has no closing quote.
            '\'' => {
                let rest: String = chars.clone().take(12).collect();
                let end = if rest.starts_with('\\') {
                    rest.char_indices().skip(1).find(|&(_, c)| c == '\'').map(|(i, _)| i)
                } else {
                    rest.char_indices().nth(1).filter(|&(_, c)| c == '\'').map(|(i, _)| i)
                };
                match end {
                    Some(end) => {
                        for _ in 0..=rest[..end].chars().count() {
                            chars.next();
                        }
                        out.push_str("' '");
                    }
                    None => out.push('\''),
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// The public items of every `.rs` file under `crates/<krate>/src`.
fn public_items_of(krate: &str) -> usize {
    let mut count = 0;
    visit(&project_root().join("crates").join(krate).join("src"), &mut |path| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        count += count_public_items(&text);
    });
    count
}

#[test]
fn public_items_stay_within_their_budget() {
    let mut wrong = Vec::new();
    for &(krate, budget) in PUBLIC_ITEM_BUDGET {
        let count = public_items_of(krate);
        if count > budget {
            wrong.push(format!(
                "{krate}: {count} public items, over its budget of {budget}; if the new items are \
                 meant to be public, raise the budget to {count} in xtask/src/tidy.rs and record \
                 them in CHANGELOG.md"
            ));
        } else if count < budget {
            wrong.push(format!(
                "{krate}: {count} public items, under its budget of {budget}; lower the budget to \
                 {count} in xtask/src/tidy.rs so the next addition is seen"
            ));
        }
    }
    assert!(wrong.is_empty(), "public item budget:\n{}", wrong.join("\n"));
}

#[test]
fn every_library_crate_has_a_public_item_budget() {
    for krate in LAYERS.iter().chain(BESIDE_THE_LAYERS.iter().map(|(name, _)| name)) {
        let is_library = project_root().join("crates").join(krate).join("src/lib.rs").exists();
        let exempt = matches!(*krate, "compaction-cli" | "compaction-testkit");
        if is_library && !exempt {
            assert!(
                PUBLIC_ITEM_BUDGET.iter().any(|(name, _)| name == krate),
                "{krate} has no line in PUBLIC_ITEM_BUDGET (xtask/src/tidy.rs)"
            );
        }
    }
}

#[test]
fn public_items_are_counted_as_declared() {
    let source = r#"
//! A crate. `pub fn in_docs()` is not code.
use std::fmt;
pub use inner::Reexported;
pub mod inner {
    pub struct Reexported;
}
/// pub fn documented() {}
pub fn free() -> &'static str { "pub fn in_a_string() {" }
pub(crate) fn crate_only() {}
pub(super) struct Narrow;
pub const fn constant_fn() -> char { '{' }
pub const LIMIT: usize = 3;
pub static NAME: &str = "}";
pub unsafe fn risky<'a>(x: &'a str) -> &'a str { x }
pub async fn later() {}
pub type Alias = u8;
pub trait Trait { fn required(&self); }
pub enum Kind { A, B }
impl Kind {
    pub fn new() -> Self { Kind::A } // pub fn in_a_comment() {}
    fn private() {}
}
#[cfg(test)]
mod tests {
    pub fn helper() {}
    #[test]
    fn works() { if true { pub fn nested() {} } }
}
pub fn after_the_tests() {}
"#;
    // inner, Reexported, free, constant_fn, LIMIT, NAME, risky, later, Alias, Trait, Kind,
    // Kind::new, after_the_tests.
    assert_eq!(count_public_items(source), 13);
    assert_eq!(count_public_items("pub fn one() {}\npub fn two() {}\n"), 2);
    assert_eq!(count_public_items("pub(crate) fn hidden() {}\npub use a::b;\n"), 0);
}

// ---------------------------------------------------------------------------------------------
// Release habits: what a published crate carries, its MSRV, and its dependencies' licences and
// versions. The lists these tests enforce live where their tools read them (Cargo.toml,
// deny.toml), so cargo-deny and these tests never disagree.

/// `cargo metadata` of the whole graph with every feature on, for this machine's target: every
/// package's `rust_version` and licence, offline (the crates of other targets may not be
/// downloaded here; cargo-deny, run with the network, covers every target).
fn full_metadata() -> Value {
    let host = host_triple();
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--all-features",
            "--offline",
            "--filter-platform",
            &host,
        ])
        .current_dir(project_root())
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let output = Command::new(rustc).arg("-vV").output().expect("rustc -vV runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.lines().find_map(|l| l.strip_prefix("host: ")).expect("rustc -vV names the host").to_owned()
}

/// The packages `cargo tree` reaches from `args` (`-p`, `--workspace`, features, edge kinds):
/// (name, version, licence), features resolved as a build of exactly those would resolve them.
fn tree(args: &[&str]) -> Vec<(String, String, String)> {
    let output = Command::new(env!("CARGO"))
        .args(["tree", "--prefix", "none", "--format", "{p}|{l}", "--offline"])
        .args(args)
        .current_dir(project_root())
        .output()
        .expect("cargo tree runs");
    assert!(output.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&output.stderr));
    let mut packages: Vec<(String, String, String)> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            // `(*)` marks a package whose dependencies were printed before.
            let (package, licence) = line.trim_end_matches(" (*)").split_once('|')?;
            let mut words = package.split_whitespace();
            let name = words.next()?.to_owned();
            let version = words.next()?.trim_start_matches('v').to_owned();
            // Our own crates are printed with their path; they are not dependencies to vet.
            let ours = package.contains(" (/") || package.contains(" (\\") || package.contains(":\\");
            (!ours).then(|| (name, version, licence.trim().to_owned()))
        })
        .collect();
    packages.sort();
    packages.dedup();
    packages
}

/// Workspace crates that go to crates.io (those without `publish = false`).
fn published(metadata: &Value) -> Vec<&Value> {
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["source"].is_null() && p["publish"].is_null())
        .filter(|p| {
            let members = metadata["workspace_members"].as_array().expect("workspace members");
            members.contains(&p["id"])
        })
        .collect()
}

/// A `rust-version` as numbers, `1.88` and `1.88.0` alike.
fn rust_version(text: &str) -> Vec<u64> {
    let mut parts: Vec<u64> =
        text.split('.').map(|p| p.parse().expect("a rust-version of numbers")).collect();
    while parts.len() < 3 {
        parts.push(0);
    }
    parts
}

/// The quoted strings of one array in deny.toml (`allow = [` … `]` under `[section]`), with what
/// follows each on its line: entries are written one a line.
fn deny_list(section: &str, key: &str) -> Vec<String> {
    let text = std::fs::read_to_string(project_root().join("deny.toml")).expect("deny.toml is at the root");
    let mut in_section = false;
    let mut in_list = false;
    let mut entries = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') && line.ends_with(']') && !in_list {
            in_section = line == format!("[{section}]");
            continue;
        }
        if !in_section {
            continue;
        }
        if !in_list {
            in_list = line.starts_with(&format!("{key} = ["));
            continue;
        }
        if line.starts_with(']') {
            break;
        }
        if !line.starts_with('#') && !line.is_empty() {
            entries.push(line.to_owned());
        }
    }
    assert!(
        !entries.is_empty(),
        "deny.toml has no [{section}] {key} list, or it is not written one entry a line"
    );
    entries
}

/// The value of `field = "..."` in a deny.toml entry line, or its first quoted string.
fn quoted(entry: &str, field: Option<&str>) -> Option<String> {
    let rest = match field {
        Some(field) => &entry[entry.find(&format!("{field} = \""))? + field.len() + 4..],
        None => &entry[entry.find('"')? + 1..],
    };
    Some(rest[..rest.find('"')?].to_owned())
}

/// Whether an SPDX licence expression is satisfied by the allowed licences: `OR` needs one side,
/// `AND` both, `WITH` names a licence with its exception (allowed only as written); the old `/`
/// separator reads as `OR`.
fn licence_allowed(expression: &str, allowed: &[String]) -> Result<bool, String> {
    let spaced = expression.replace('(', " ( ").replace(')', " ) ").replace('/', " OR ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    fn or(tokens: &[&str], at: &mut usize, allowed: &[String]) -> Result<bool, String> {
        let mut value = and(tokens, at, allowed)?;
        while tokens.get(*at) == Some(&"OR") {
            *at += 1;
            value |= and(tokens, at, allowed)?;
        }
        Ok(value)
    }
    fn and(tokens: &[&str], at: &mut usize, allowed: &[String]) -> Result<bool, String> {
        let mut value = atom(tokens, at, allowed)?;
        while tokens.get(*at) == Some(&"AND") {
            *at += 1;
            value &= atom(tokens, at, allowed)?;
        }
        Ok(value)
    }
    fn atom(tokens: &[&str], at: &mut usize, allowed: &[String]) -> Result<bool, String> {
        let token = *tokens.get(*at).ok_or("the expression ends early")?;
        *at += 1;
        if token == "(" {
            let value = or(tokens, at, allowed)?;
            if tokens.get(*at) != Some(&")") {
                return Err("a parenthesis is not closed".into());
            }
            *at += 1;
            return Ok(value);
        }
        if ["AND", "OR", "WITH", ")"].contains(&token) {
            return Err(format!("`{token}` where a licence should be"));
        }
        let mut licence = token.to_owned();
        if tokens.get(*at) == Some(&"WITH") {
            let exception = tokens.get(*at + 1).ok_or("WITH names no exception")?;
            licence = format!("{licence} WITH {exception}");
            *at += 2;
        }
        Ok(allowed.contains(&licence))
    }
    let mut at = 0;
    let value = or(&tokens, &mut at, allowed)?;
    if at != tokens.len() {
        return Err(format!("unexpected `{}`", tokens[at]));
    }
    Ok(value)
}

#[test]
fn licence_expressions_are_read_as_spdx_reads_them() {
    let allowed = vec!["MIT".to_owned(), "Apache-2.0".to_owned(), "Unicode-3.0".to_owned()];
    for (expression, expected) in [
        ("MIT", true),
        ("GPL-3.0", false),
        ("MIT OR GPL-3.0", true),
        ("GPL-3.0 OR LGPL-2.1-or-later", false),
        ("(MIT OR Apache-2.0) AND Unicode-3.0", true),
        ("(MIT OR Apache-2.0) AND BSD-3-Clause", false),
        ("Apache-2.0 WITH LLVM-exception", false),
        ("Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT", true),
        ("MIT/Apache-2.0", true),
        ("Unlicense/GPL-3.0", false),
    ] {
        assert_eq!(licence_allowed(expression, &allowed), Ok(expected), "{expression}");
    }
    assert!(licence_allowed("MIT OR", &allowed).is_err());
    assert!(licence_allowed("(MIT", &allowed).is_err());
    assert!(licence_allowed("MIT Apache-2.0", &allowed).is_err());
}

/// What crates.io and docs.rs show of each published crate is there, and the rest of the
/// workspace stays unpublished.
#[test]
fn published_crates_carry_what_crates_io_and_docs_rs_show() {
    let metadata = metadata();
    let root = project_root();
    let licence_texts: Vec<(&str, String)> = ["LICENSE-MIT", "LICENSE-APACHE"]
        .into_iter()
        .map(|file| {
            (file, std::fs::read_to_string(root.join(file)).expect("the licence texts are at the root"))
        })
        .collect();
    let published = published(&metadata);
    let names: Vec<&str> = published.iter().filter_map(|p| p["name"].as_str()).collect();
    for unpublished in ["compaction-testkit", "compaction-benches", "xtask"] {
        assert!(!names.contains(&unpublished), "{unpublished} must be `publish = false`");
    }
    assert!(names.len() >= 9, "fewer published crates than expected: {names:?}");
    for package in published {
        let name = package["name"].as_str().expect("name");
        let dir = std::path::Path::new(package["manifest_path"].as_str().expect("manifest path"))
            .parent()
            .expect("a crate directory")
            .to_path_buf();
        let field = |key: &str| package[key].as_str().unwrap_or_default().to_owned();
        assert!(field("description").len() > 20, "{name}: no description");
        assert_eq!(field("license"), "MIT OR Apache-2.0", "{name}: licence");
        assert!(!field("repository").is_empty(), "{name}: no repository");
        assert!(!field("rust_version").is_empty(), "{name}: no rust-version");
        assert_eq!(field("readme"), "README.md", "{name}: readme");
        assert!(dir.join("README.md").is_file(), "{name}: README.md is missing");
        let keywords = package["keywords"].as_array().expect("keywords");
        assert!((1..=5).contains(&keywords.len()), "{name}: crates.io takes 1 to 5 keywords");
        for keyword in keywords.iter().filter_map(Value::as_str) {
            assert!(
                keyword.len() <= 20
                    && keyword
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'),
                "{name}: keyword {keyword:?} is not one crates.io takes"
            );
        }
        assert!(!package["categories"].as_array().expect("categories").is_empty(), "{name}: no category");
        assert_eq!(
            package["metadata"]["docs"]["rs"]["all-features"],
            Value::Bool(true),
            "{name}: [package.metadata.docs.rs] all-features = true, so docs.rs shows what features add"
        );
        // cargo packages only what is inside the crate's directory (no symlinks followed out of
        // it), so each crate carries its own copy of the licence texts.
        for (file, text) in &licence_texts {
            let copy = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
            assert!(copy == *text, "{name}: {file} must be a copy of the root's");
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        for file in ["/README.md", "/LICENSE-MIT", "/LICENSE-APACHE", "/src"] {
            assert!(
                manifest.lines().any(|l| l.starts_with("include = [") && l.contains(&format!("\"{file}\""))),
                "{name}: `include` leaves out {file}"
            );
        }
    }
}

/// Each crate declares a `rust-version` no lower than what any crate it builds with declares:
/// its dependencies and dev-dependencies (ours included), every feature on, at the versions
/// Cargo.lock pins.
#[test]
fn declared_rust_version_covers_what_dependencies_need() {
    let metadata = metadata();
    let full = full_metadata();
    let declared: BTreeMap<(String, String), String> = full["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| {
            let key = (p["name"].as_str()?.to_owned(), p["version"].as_str()?.to_owned());
            Some((key, p["rust_version"].as_str()?.to_owned()))
        })
        .collect();
    let ours: BTreeMap<String, String> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| Some((p["name"].as_str()?.to_owned(), p["rust_version"].as_str()?.to_owned())))
        .collect();
    let mut failures = Vec::new();
    for package in published(&metadata) {
        let name = package["name"].as_str().expect("name");
        let own = package["rust_version"].as_str().expect("a published crate declares rust-version");
        let mut needs: Vec<(Vec<u64>, String)> = Vec::new();
        for (dep, version, _) in tree(&["-p", name, "--all-features", "-e", "normal,build,dev"]) {
            if let Some(required) = declared.get(&(dep.clone(), version.clone())) {
                needs.push((rust_version(required), format!("{dep} {version} needs {required}")));
            }
        }
        // Our own crates are left out of `tree`'s list; their declared versions count too.
        let our_deps = package["dependencies"].as_array().expect("dependencies");
        for dep in our_deps.iter().filter_map(|d| d["name"].as_str()) {
            if let Some(required) = ours.get(dep) {
                needs.push((rust_version(required), format!("{dep} needs {required}")));
            }
        }
        needs.sort();
        if let Some((highest, why)) = needs.last() {
            if rust_version(own) < *highest {
                failures.push(format!("{name} declares rust-version {own}, but {why}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "raise the rust-version (README: Minimum supported Rust version), or pin the dependency lower:\n{}",
        failures.join("\n")
    );
}

/// The MSRV a crate's docs state is the one its Cargo.toml declares.
#[test]
fn msrv_sections_state_the_declared_version() {
    let metadata = metadata();
    let root = project_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let policy = readme
        .split("\n## Minimum supported Rust version\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README.md has a `## Minimum supported Rust version` section");
    let workspace_manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let workspace_version = workspace_manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|l| l.strip_suffix('"'))
        .expect("[workspace.package] rust-version");
    for package in published(&metadata) {
        let name = package["name"].as_str().expect("name");
        let version = package["rust_version"].as_str().expect("rust-version");
        assert!(
            policy.contains(&format!("Rust {version}")),
            "README's MSRV section does not state Rust {version}"
        );
        if version != workspace_version {
            assert!(
                policy.contains(name),
                "README's MSRV section does not name {name}, which declares {version}"
            );
        }
        let dir = std::path::Path::new(package["manifest_path"].as_str().expect("manifest path"))
            .parent()
            .expect("a crate directory")
            .to_path_buf();
        let lib = dir.join("src/lib.rs");
        if lib.is_file() {
            let text = std::fs::read_to_string(&lib).expect("lib.rs");
            let stated = text
                .split("//! ## Minimum supported Rust version\n")
                .nth(1)
                .and_then(|rest| {
                    rest.lines().map(|l| l.trim_start_matches("//!").trim()).find(|l| !l.is_empty())
                })
                .unwrap_or_else(|| {
                    panic!("{name}: lib.rs has no `## Minimum supported Rust version` section")
                });
            assert!(
                states_version(stated, version),
                "{name}: lib.rs states MSRV {stated:?}, Cargo.toml declares {version}"
            );
        }
        // A README that mentions the MSRV mentions this one.
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap_or_default();
        for (at, _) in readme.match_indices("MSRV ") {
            let stated = &readme[at + 5..];
            assert!(
                states_version(stated, version),
                "{name}: README.md says MSRV {}, Cargo.toml declares {version}",
                stated.lines().next().unwrap_or_default()
            );
        }
    }
}

/// Whether `text` begins with `version` as a whole version (`1.88` in `1.88.`, not in `1.881`
/// or `1.88.1`).
fn states_version(text: &str, version: &str) -> bool {
    let Some(rest) = text.strip_prefix(version) else { return false };
    let mut chars = rest.chars();
    match chars.next() {
        Some(c) if c.is_ascii_digit() => false,
        Some('.') => !chars.next().is_some_and(|c| c.is_ascii_digit()),
        _ => true,
    }
}

/// Clippy's `incompatible_msrv` (a std API newer than the crate's `rust-version`) stays an error
/// in every crate.
#[test]
fn incompatible_msrv_lint_is_on_everywhere() {
    let root = project_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let clippy = manifest.split("[workspace.lints.clippy]").nth(1).expect("[workspace.lints.clippy]");
    let clippy = clippy.split("\n[").next().unwrap_or_default();
    assert!(
        clippy.lines().any(|l| l.trim() == "incompatible_msrv = \"deny\""),
        "[workspace.lints.clippy] must keep `incompatible_msrv = \"deny\"`"
    );
    let metadata = metadata();
    for package in metadata["packages"].as_array().expect("packages") {
        let path = package["manifest_path"].as_str().expect("manifest path");
        let text = std::fs::read_to_string(path).expect("Cargo.toml");
        assert!(
            text.contains("[lints]\nworkspace = true"),
            "{path}: `[lints] workspace = true`, so the workspace's lints apply"
        );
    }
}

/// Every dependency a build of ours can pull in (every feature, this machine's target) is
/// licensed under deny.toml's allow-list.
#[test]
fn dependency_licences_are_on_the_allow_list() {
    let allowed: Vec<String> =
        deny_list("licenses", "allow").iter().filter_map(|entry| quoted(entry, None)).collect();
    let mut refused = Vec::new();
    for (name, version, licence) in tree(&["--workspace", "--all-features", "-e", "normal,build"]) {
        match licence_allowed(&licence, &allowed) {
            Ok(true) => {}
            Ok(false) => refused.push(format!("{name} {version}: {licence}")),
            Err(error) => {
                refused.push(format!("{name} {version}: {licence:?} does not read as SPDX ({error})"))
            }
        }
    }
    assert!(
        refused.is_empty(),
        "licences outside deny.toml's [licenses] allow (add one there with the reason, or drop the dependency):\n{}",
        refused.join("\n")
    );
}

/// No crate is built in two versions unless deny.toml's `[bans] skip` names the older ones with a
/// reason; and every skip still names a locked package, so the list does not outlive its reasons.
#[test]
fn no_duplicate_dependency_versions_but_the_skipped() {
    let skips: Vec<(String, String)> = deny_list("bans", "skip")
        .iter()
        .map(|entry| {
            let krate = quoted(entry, Some("crate"))
                .unwrap_or_else(|| panic!("deny.toml skip without `crate`: {entry}"));
            let reason = quoted(entry, Some("reason")).unwrap_or_default();
            assert!(reason.len() > 5, "deny.toml skip of {krate} gives no reason");
            let (name, version) =
                krate.split_once('@').unwrap_or_else(|| panic!("deny.toml skip {krate} is not NAME@VERSION"));
            (name.to_owned(), version.to_owned())
        })
        .collect();
    let lock = std::fs::read_to_string(project_root().join("Cargo.lock")).expect("Cargo.lock");
    for (name, version) in &skips {
        let entry = format!("name = \"{name}\"\nversion = \"{version}\"\n");
        assert!(lock.contains(&entry), "deny.toml skips {name}@{version}, which Cargo.lock no longer holds");
    }
    let mut versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, version, _) in tree(&["--workspace", "--all-features", "-e", "normal,build"]) {
        versions.entry(name).or_default().push(version);
    }
    let mut duplicated = Vec::new();
    for (name, list) in versions {
        let kept: Vec<&String> =
            list.iter().filter(|v| !skips.iter().any(|(n, skipped)| *n == name && skipped == *v)).collect();
        if kept.len() > 1 {
            duplicated.push(format!("{name}: {}", list.join(", ")));
        }
    }
    assert!(
        duplicated.is_empty(),
        "crates built in more than one version (align the dependencies, or add the older to deny.toml's [bans] skip with the reason):\n{}",
        duplicated.join("\n")
    );
}
