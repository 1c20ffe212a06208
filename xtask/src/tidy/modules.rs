//! A crate's module graph, read from its sources with `syn`: every path a module names that
//! leads into the crate is an edge, through `use` trees and paths in code, `crate::`, `super::`
//! and `self::`, and the crate root's own paths to its modules (`commands::prune::run`). A module
//! that declares another (`mod prune;`) does not use it by that, and paths inside macro
//! invocations are tokens, not read. `cli_modules` and `formats_layers` check their crates with it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

use super::parse_rust;

/// The modules under `src`, by path from the crate root (`commands::prune` for
/// `src/commands/prune.rs`, `commands` for `src/commands/mod.rs`, `` for `src/main.rs`), with
/// their files.
pub(super) fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    super::visit(src, &mut |path| {
        let relative = path.strip_prefix(src).expect("under src").with_extension("");
        let mut parts: Vec<String> =
            relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|p| p == "mod") || parts == ["main"] || parts == ["lib"] {
            parts.pop();
        }
        found.insert(parts.join("::"), path.to_path_buf());
    });
    found
}

/// Every path a file names that leads into the crate, resolved from the crate root: `crate::a`,
/// `super::a` and `self::a` in `use` trees and in code, and, in the crate root, paths that start
/// with one of its modules.
struct CratePaths<'m> {
    /// The module the code being read is in, inline modules (`mod tests { .. }`) included.
    at: Vec<String>,
    /// The crate's top-level modules, for the root's bare paths.
    top: &'m BTreeSet<String>,
    found: Vec<Vec<String>>,
}

impl CratePaths<'_> {
    /// `segments` from the crate root, if they lead into the crate.
    fn resolve(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.at.clone(),
            "super" => {
                let mut base = self.at.clone();
                base.pop()?;
                let mut rest = rest;
                while let Some(("super", more)) = rest.split_first().map(|(s, more)| (s.as_str(), more)) {
                    base.pop()?;
                    rest = more;
                }
                return Some(base.into_iter().chain(rest.iter().cloned()).collect());
            }
            name if self.at.is_empty() && self.top.contains(name) => vec![name.to_owned()],
            _ => return None,
        };
        base.extend(rest.iter().filter(|s| *s != "self").cloned());
        Some(base)
    }

    fn push(&mut self, segments: Vec<String>) {
        if let Some(path) = self.resolve(&segments) {
            self.found.push(path);
        }
    }
}

impl<'ast> Visit<'ast> for CratePaths<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        fn walk(tree: &syn::UseTree, prefix: &[String], out: &mut Vec<Vec<String>>) {
            let joined = |name: String| prefix.iter().cloned().chain([name]).collect::<Vec<_>>();
            match tree {
                syn::UseTree::Path(path) => walk(&path.tree, &joined(path.ident.to_string()), out),
                syn::UseTree::Name(name) => out.push(joined(name.ident.to_string())),
                syn::UseTree::Rename(rename) => out.push(joined(rename.ident.to_string())),
                syn::UseTree::Glob(_) => out.push(prefix.to_vec()),
                syn::UseTree::Group(group) => {
                    for tree in &group.items {
                        walk(tree, prefix, out);
                    }
                }
            }
        }
        let mut paths = Vec::new();
        walk(&item.tree, &[], &mut paths);
        for path in paths {
            self.push(path);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        self.at.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.at.pop();
    }

    /// `pub(crate)` and `pub(super)` name who may see an item, not a module it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    // Paths inside macro invocations (`format!`, `assert!`) are tokens, not read: the commands
    // name crate items in them only through variables.
}

/// The module a path from the root names: its longest prefix that is a module.
fn module_of(path: &[String], modules: &BTreeMap<String, PathBuf>) -> String {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|name| modules.contains_key(name))
        .unwrap_or_default()
}

/// Every edge `from → to` between two modules of the crate at `src`, with a path that shows it.
pub(super) fn edges(src: &Path) -> Result<BTreeMap<(String, String), String>, String> {
    let modules = modules(src);
    let top: BTreeSet<String> =
        modules.keys().filter(|m| !m.is_empty() && !m.contains("::")).cloned().collect();
    let mut edges = BTreeMap::new();
    for (name, file) in &modules {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let syntax = parse_rust(file, &text)?;
        let at = if name.is_empty() { Vec::new() } else { name.split("::").map(str::to_owned).collect() };
        let mut paths = CratePaths { at, top: &top, found: Vec::new() };
        paths.visit_file(&syntax);
        for path in paths.found {
            let to = module_of(&path, &modules);
            if &to != name {
                edges.entry((name.clone(), to)).or_insert_with(|| format!("crate::{}", path.join("::")));
            }
        }
    }
    Ok(edges)
}

/// The circles among `edges`, each as the modules met, the first again at the end.
pub(super) fn circles(edges: &BTreeMap<(String, String), String>) -> Vec<Vec<String>> {
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        out.entry(from.as_str()).or_default().push(to.as_str());
    }
    // Depth-first, remembering the path: a module met again on it closes a circle.
    fn visit<'a>(
        module: &'a str,
        out: &BTreeMap<&'a str, Vec<&'a str>>,
        done: &mut BTreeSet<&'a str>,
        path: &mut Vec<&'a str>,
        found: &mut Vec<Vec<String>>,
    ) {
        if let Some(at) = path.iter().position(|m| *m == module) {
            found.push(path[at..].iter().chain([&module]).map(|m| (*m).to_owned()).collect());
            return;
        }
        if !done.insert(module) {
            return;
        }
        path.push(module);
        for next in out.get(module).into_iter().flatten() {
            visit(next, out, done, path, found);
        }
        path.pop();
    }
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for module in out.keys() {
        visit(module, &out, &mut done, &mut Vec::new(), &mut found);
    }
    found
}

/// A circle as a reader fixes it: `a → b → a (a uses crate::b::x; b uses crate::a::y)`, the
/// crate root named `root`.
pub(super) fn shown(circle: &[String], edges: &BTreeMap<(String, String), String>, root: &str) -> String {
    let name = |m: &String| if m.is_empty() { root.to_owned() } else { m.clone() };
    let steps: Vec<String> = circle.iter().map(name).collect();
    let why: Vec<String> = circle
        .windows(2)
        .map(|w| format!("{} uses {}", name(&w[0]), edges[&(w[0].clone(), w[1].clone())]))
        .collect();
    format!("{} ({})", steps.join(" → "), why.join("; "))
}

#[test]
fn the_module_reader_resolves_crate_super_and_root_paths_and_finds_circles() {
    let dir = std::env::temp_dir().join(format!("tidy-cli-modules-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("commands")).unwrap();
    let files = [
        ("main.rs", "mod a; mod commands; fn main() { commands::run::go(); }"),
        ("a.rs", "use crate::commands::run::Step;\n#[cfg(test)] mod tests { use super::*; }"),
        ("commands/mod.rs", "pub mod run; pub(crate) fn f() -> usize { crate::a::size() }"),
        ("commands/run.rs", "use super::f; pub struct Step; pub fn go() { let _ = self::Step; }"),
    ];
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let edges = edges(&dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let listed: Vec<String> = edges.keys().map(|(from, to)| format!("{from}>{to}")).collect();
    assert_eq!(listed, [">commands::run", "a>commands::run", "commands>a", "commands::run>commands"]);
    let found: Vec<String> = circles(&edges).iter().map(|c| shown(c, &edges, "main")).collect();
    assert_eq!(
        found,
        ["commands::run → commands → a → commands::run (commands::run uses crate::commands::f; \
          commands uses crate::a::size; a uses crate::commands::run::Step)"]
    );
}
