//! Architecture invariants, checked by `cargo test`.
//!
//! ARCHITECTURE.md states them; these tests keep them true, one file a concern:
//!
//! - `layers`: the crates' dependency direction, the DAG and who may use testkit and formats;
//! - `io`: which crates do I/O (the file system, the network, processes) and which only decide;
//! - `docs`: the `//!` header every Rust file opens with;
//! - `public_api`: each library crate's count of public items against its budget;
//! - `release`: what a published crate carries, its MSRV and the lints it keeps;
//! - `licences`: dependencies' licences and duplicate versions against deny.toml.
//!
//! This file holds what they share: `cargo metadata` and `cargo tree` as data, and the walk over
//! the sources. Manifests and deny.toml are read with `toml`, licence expressions with `spdx`
//! and Rust sources with `syn`, as the tools they mirror read them.

mod docs;
mod io;
mod layers;
mod licences;
mod public_api;
mod release;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::project_root;

/// `cargo metadata` of the workspace's own packages.
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

/// Calls `f` on every `.rs` file under `dir`, leaving out `target` and `data` folders.
fn visit(dir: &Path, f: &mut dyn FnMut(&Path)) {
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

/// A Rust source file parsed with `syn`, or the parse error with the file named: a file tidy
/// cannot read is a failure, not a file skipped.
fn parse_rust(path: &Path, text: &str) -> Result<syn::File, String> {
    syn::parse_file(text).map_err(|error| format!("{}: does not parse as Rust: {error}", path.display()))
}
