//! Architecture invariants, checked by `cargo test`.
//!
//! ARCHITECTURE.md states them; these tests keep them true, one file a concern:
//!
//! - `layers`: the crates' dependency direction, the DAG and who may use testkit and formats;
//! - `modules`: a crate's module graph, read with `syn`, and the circles in it; `cli_modules`:
//!   the command's modules import one another without a circle; `formats_layers`:
//!   compaction-formats' modules in layers, none using one above;
//! - `io`: which crates do I/O (the file system, the network, processes) and which only decide;
//! - `docs`: the `//!` header every Rust file opens with;
//! - `public_api`: each library crate's count of public items against its budget;
//! - `release`: what a published crate carries, its MSRV and the lints it keeps;
//! - `licences`: dependencies' licences and duplicate versions against deny.toml.
//!
//! This file holds what they share: `cargo metadata` and `cargo tree` as data, and the walk over
//! the sources (`code_text`: a file's code without comments or strings, its imports spelt out).
//! Manifests and deny.toml are read with `toml`, licence expressions with `spdx`
//! and Rust sources with `syn`, as the tools they mirror read them.

mod cli_modules;
mod docs;
mod formats_layers;
mod io;
mod layers;
mod licences;
mod modules;
mod public_api;
mod release;
mod threads;

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
    syn::parse_file(text).map_err(|error| {
        let at = error.span().start();
        format!("{}:{}:{}: does not parse as Rust: {error}", path.display(), at.line, at.column + 1)
    })
}

/// The code of a Rust file as one line of text to search for paths (`std::fs`, `File::`,
/// `tokio`): its tokens with comments, doc comments and string literals left out, `::` kept
/// against its neighbours, then every path its `use` declarations import, spelt out whole
/// (`use std::{fs, io::Read}` as `std::fs` and `std::io::Read`). Code inside macro invocations
/// is kept, as tokens. A file that does not parse is an error naming it.
fn code_text(path: &Path, text: &str) -> Result<String, String> {
    let file = parse_rust(path, text)?;
    let tokens: proc_macro2::TokenStream =
        text.parse().map_err(|error| format!("{}: does not parse as Rust: {error}", path.display()))?;
    let mut code = String::new();
    render_tokens(tokens, &mut code);
    let mut imports = UsePaths(Vec::new());
    syn::visit::Visit::visit_file(&mut imports, &file);
    for import in imports.0 {
        code.push('\n');
        code.push_str(&import);
    }
    Ok(code)
}

/// Writes `tokens` to `out`: identifiers and punctuation as written, a space between two
/// identifiers and after a lone punctuation mark, literals as a space.
fn render_tokens(tokens: proc_macro2::TokenStream, out: &mut String) {
    use proc_macro2::{Delimiter, Spacing, TokenTree};
    let mut after_ident = false;
    for tree in tokens {
        match tree {
            TokenTree::Ident(ident) => {
                if after_ident {
                    out.push(' ');
                }
                out.push_str(&ident.to_string());
                after_ident = true;
                continue;
            }
            TokenTree::Punct(punct) => {
                out.push(punct.as_char());
                if punct.spacing() == Spacing::Alone && punct.as_char() != ':' {
                    out.push(' ');
                }
            }
            TokenTree::Literal(_) => out.push(' '),
            TokenTree::Group(group) => {
                let (open, close) = match group.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::None => ("", ""),
                };
                out.push_str(open);
                render_tokens(group.stream(), out);
                out.push_str(close);
                out.push(' ');
            }
        }
        after_ident = false;
    }
}

/// The visitor behind [`code_text`]: every path a `use` imports, spelt out from the root.
struct UsePaths(Vec<String>);

impl<'ast> syn::visit::Visit<'ast> for UsePaths {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        fn walk(tree: &syn::UseTree, prefix: &str, out: &mut Vec<String>) {
            let joined = |name: &dyn std::fmt::Display| {
                if prefix.is_empty() {
                    name.to_string()
                } else {
                    format!("{prefix}::{name}")
                }
            };
            match tree {
                syn::UseTree::Path(path) => walk(&path.tree, &joined(&path.ident), out),
                syn::UseTree::Name(name) => out.push(joined(&name.ident)),
                syn::UseTree::Rename(rename) => out.push(joined(&rename.ident)),
                syn::UseTree::Glob(_) => out.push(joined(&"*")),
                syn::UseTree::Group(group) => {
                    for tree in &group.items {
                        walk(tree, prefix, out);
                    }
                }
            }
        }
        walk(&item.tree, "", &mut self.0);
    }
}

#[test]
fn code_is_read_without_comments_strings_or_docs_and_imports_whole() {
    let source = r#"//! Reads nothing: `std::fs::read` in the docs is the caller's.
use std::{fs, io::Read as _};
// tokio, in a comment.
/* std::net in a block comment */
const NOTE: &str = "TcpStream in a string";
fn f() { let _ = File::open("x"); println!("{}", std::os::unix::ffi::OsStrExt::as_bytes); }
"#;
    let code = code_text(Path::new("a.rs"), source).expect("parses");
    for present in ["std::fs", "std::io::Read", "File::open", "std::os::unix"] {
        assert!(code.contains(present), "{present} in {code}");
    }
    for absent in ["tokio", "std::net", "TcpStream", "std::fs::read"] {
        assert!(!code.contains(absent), "{absent} in {code}");
    }
}
