//! Release habits: what a published crate carries (crates.io and docs.rs fields, licence
//! texts, `include`), its MSRV (declared, covering its dependencies', stated in its docs) and
//! the lints every crate keeps. Manifests are read with `toml`, as cargo reads them.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

use super::{metadata, parse_rust, published, tree};
use crate::project_root;

/// What these checks read of a Cargo.toml, the workspace's or a crate's.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Manifest {
    package: Option<Package>,
    workspace: Option<Workspace>,
    lints: Option<Lints>,
}

/// `[package]`: what `cargo package` takes.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Package {
    include: Vec<String>,
}

/// `[workspace]`: what its members inherit.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Workspace {
    package: WorkspacePackage,
    lints: Option<WorkspaceLints>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "kebab-case")]
struct WorkspacePackage {
    rust_version: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct WorkspaceLints {
    clippy: BTreeMap<String, toml::Value>,
}

/// `[lints]` of a member: `workspace = true` inherits the workspace's.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Lints {
    workspace: bool,
}

/// The manifest at `path`; one that does not read as TOML fails naming the file and the place.
fn read_manifest(path: &Path) -> Manifest {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_manifest(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn parse_manifest(text: &str) -> Result<Manifest, toml::de::Error> {
    toml::from_str(text)
}

/// Whether `[workspace.lints.clippy]` keeps `incompatible_msrv` at `deny` (written as the level
/// alone or as `{ level = "deny", priority = N }`).
fn denies_incompatible_msrv(workspace: &Manifest) -> bool {
    let clippy = &workspace
        .workspace
        .as_ref()
        .and_then(|w| w.lints.as_ref())
        .expect("[workspace.lints.clippy]")
        .clippy;
    match clippy.get("incompatible_msrv") {
        Some(toml::Value::String(level)) => level == "deny",
        Some(toml::Value::Table(table)) => table.get("level").and_then(toml::Value::as_str) == Some("deny"),
        _ => false,
    }
}

/// The files of `/README.md`, `/LICENSE-MIT`, `/LICENSE-APACHE` and `/src` that a published
/// crate's `include` leaves out.
fn left_out_of_include(manifest: &Manifest) -> Vec<&'static str> {
    let include = manifest.package.as_ref().map(|p| p.include.as_slice()).unwrap_or_default();
    ["/README.md", "/LICENSE-MIT", "/LICENSE-APACHE", "/src"]
        .into_iter()
        .filter(|file| !include.iter().any(|i| i == file))
        .collect()
}

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

/// A `rust-version` as numbers, `1.88` and `1.88.0` alike.
fn rust_version(text: &str) -> Vec<u64> {
    let mut parts: Vec<u64> =
        text.split('.').map(|p| p.parse().expect("a rust-version of numbers")).collect();
    while parts.len() < 3 {
        parts.push(0);
    }
    parts
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
        let dir = Path::new(package["manifest_path"].as_str().expect("manifest path"))
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
        if let Some(file) = left_out_of_include(&read_manifest(&dir.join("Cargo.toml"))).first() {
            panic!("{name}: `include` leaves out {file}");
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
    let workspace_manifest = read_manifest(&root.join("Cargo.toml"));
    let workspace_version = workspace_manifest
        .workspace
        .as_ref()
        .and_then(|w| w.package.rust_version.as_deref())
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
        let dir = Path::new(package["manifest_path"].as_str().expect("manifest path"))
            .parent()
            .expect("a crate directory")
            .to_path_buf();
        let lib = dir.join("src/lib.rs");
        if lib.is_file() {
            let text = std::fs::read_to_string(&lib).expect("lib.rs");
            let file = parse_rust(&lib, &text).unwrap_or_else(|error| panic!("{error}"));
            let docs = crate_docs(&file);
            let stated = stated_msrv(&docs).unwrap_or_else(|| {
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

/// A crate's own documentation, as rustdoc shows it: the text of the inner `doc` attributes
/// (`//!` lines, `/*! */`, `#![doc = "..."]`) of its lib.rs, one a line.
fn crate_docs(file: &syn::File) -> String {
    let mut docs = String::new();
    for attr in &file.attrs {
        if !matches!(attr.style, syn::AttrStyle::Inner(_)) || !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(syn::MetaNameValue {
            value: syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(text), .. }),
            ..
        }) = &attr.meta
        {
            docs.push_str(&text.value());
            docs.push('\n');
        }
    }
    docs
}

/// The first words under the docs' `## Minimum supported Rust version` heading.
fn stated_msrv(docs: &str) -> Option<&str> {
    let mut lines = docs.lines().map(str::trim);
    lines.find(|line| *line == "## Minimum supported Rust version")?;
    lines.find(|line| !line.is_empty())
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
    assert!(
        denies_incompatible_msrv(&read_manifest(&root.join("Cargo.toml"))),
        "[workspace.lints.clippy] must keep `incompatible_msrv = \"deny\"`"
    );
    let metadata = metadata();
    for package in metadata["packages"].as_array().expect("packages") {
        let path = package["manifest_path"].as_str().expect("manifest path");
        let inherits = read_manifest(Path::new(path)).lints.is_some_and(|lints| lints.workspace);
        assert!(inherits, "{path}: `[lints] workspace = true`, so the workspace's lints apply");
    }
}

#[test]
fn manifests_that_break_a_release_habit_are_caught() {
    let member = |text: &str| parse_manifest(text).expect("a test manifest");
    // A published crate whose `include` leaves out its licence texts and sources.
    let manifest = member("[package]\nname = \"a\"\ninclude = [\"/README.md\", \"/LICENSE-MIT\"]\n");
    assert_eq!(left_out_of_include(&manifest), ["/LICENSE-APACHE", "/src"]);
    let all = "[package]\ninclude = [\"/README.md\", \"/LICENSE-MIT\", \"/LICENSE-APACHE\", \"/src\"]\n";
    assert!(left_out_of_include(&member(all)).is_empty());
    // A crate without `[lints] workspace = true`, or with it turned off.
    for text in ["[package]\nname = \"a\"\n", "[lints]\nworkspace = false\n"] {
        assert!(!member(text).lints.is_some_and(|lints| lints.workspace), "{text}");
    }
    assert!(member("[lints]\nworkspace = true\n").lints.is_some_and(|lints| lints.workspace));
    // The workspace's clippy lints without `incompatible_msrv = "deny"`.
    for (text, denies) in [
        ("[workspace.lints.clippy]\nincompatible_msrv = \"deny\"\n", true),
        ("[workspace.lints.clippy]\nincompatible_msrv = { level = \"deny\", priority = 1 }\n", true),
        ("[workspace.lints.clippy]\nincompatible_msrv = \"warn\"\n", false),
        ("[workspace.lints.clippy]\nall = \"deny\"\n", false),
    ] {
        assert_eq!(denies_incompatible_msrv(&member(text)), denies, "{text}");
    }
    // A manifest that is not TOML says where.
    let error = parse_manifest("[package\nname = 1\n").expect_err("not TOML").to_string();
    assert!(error.contains("line 1"), "{error}");
}

#[test]
fn a_crate_stating_another_msrv_than_it_declares_is_caught() {
    let lib = "//! A crate.\n//!\n//! ## Minimum supported Rust version\n//!\n//! 1.80, the workspace's.\n\npub fn f() {}\n";
    let docs = crate_docs(&syn::parse_file(lib).expect("parses"));
    let stated = stated_msrv(&docs).expect("a section");
    assert_eq!(stated, "1.80, the workspace's.");
    assert!(states_version(stated, "1.80"));
    assert!(!states_version(stated, "1.88"), "declared 1.88, stated 1.80");
    assert!(!states_version("1.881", "1.88") && !states_version("1.88.1", "1.88"));
    // No section at all, or the heading only in an item's docs, is no statement.
    assert_eq!(stated_msrv(&crate_docs(&syn::parse_file("//! A crate.\n").expect("parses"))), None);
    let item_doc = "//! A crate.\n/// ## Minimum supported Rust version\n/// 1.80\npub fn f() {}\n";
    assert_eq!(stated_msrv(&crate_docs(&syn::parse_file(item_doc).expect("parses"))), None);
}
