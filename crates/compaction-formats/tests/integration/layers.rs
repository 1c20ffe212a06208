//! The crate's modules import one another in one direction: no import loop, and no module
//! reaching up to a layer above its own. Read from `src/` as text: every `use crate::…` and every
//! `crate::x::` path in code (not in comments) is an edge from the module it is in.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first, and the modules in each: a module may use modules of its own layer
/// or below, never above. A new module gets a line here.
const LAYERS: &[(&str, &[&str])] = &[
    // Plain data and helpers that know no format: the public types, errors, notes, the state a
    // conversation keeps to be written back.
    (
        "leaves",
        &["conversation", "error", "format", "kept", "notes", "provider", "threads", "usage", "values"],
    ),
    // Helpers several formats share, none of which imports a format.
    (
        "shared helpers",
        &[
            "codec", "document", "eventlog", "form", "inplace", "logback", "overlay", "pairing", "shapes",
            "style", "tree",
        ],
    ),
    // One module per format (a format may build on another: Claude Code on Anthropic).
    (
        "formats",
        &["anthropic", "claude_code", "codex", "haystack", "openai", "openhands", "request", "responses"],
    ),
    // Telling the format, the table of formats, reading and writing.
    ("pipeline and dispatch", &["detect", "formats", "ids", "pipeline", "read", "write"]),
    // The crate's docs and re-exports, and its unit tests.
    ("lib", &["lib", "tests"]),
];

/// The modules under `src/`, by path (`a::b` for `src/a/b.rs` or `src/a/b/mod.rs`), with their files.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(src).unwrap().with_extension("");
                let mut parts: Vec<String> =
                    relative.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
                if parts.last().is_some_and(|p| p == "mod") {
                    parts.pop();
                }
                found.insert(parts.join("::"), path);
            }
        }
    }
    found
}

/// The code of a file, comments left out (`//` to the end of a line; the crate has no block comments).
fn code(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        let mut in_string = false;
        let mut cut = line.len();
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' if in_string => i += 1,
                b'"' => in_string = !in_string,
                b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => {
                    cut = i;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        code.push_str(&line[..cut]);
        code.push('\n');
    }
    code
}

/// The paths a use tree spells, each as its segments: `a::{b, c::d}` gives `a::b` and `a::c::d`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree);
        return vec![path.split("::").map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect()];
    };
    let prefix: Vec<String> =
        tree[..open].split("::").map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap()];
    let mut paths = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices().chain([(inner.len(), ',')]) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                for path in expand(&inner[start..i]) {
                    paths.push(prefix.iter().cloned().chain(path).collect());
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    paths
}

/// The crate paths `code` names: those of `use crate::…;` trees, and `crate::a::b` paths elsewhere.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].trim_end();
        let after = &rest[at + "crate::".len()..];
        if before.ends_with("use") || before.ends_with("pub(crate) use") {
            let end = after.find(';').unwrap_or(after.len());
            paths.extend(expand(&after[..end]));
            rest = &after[end..];
        } else {
            let end =
                after.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(after.len());
            paths.push(after[..end].split("::").filter(|s| !s.is_empty()).map(str::to_owned).collect());
            rest = &after[end..];
        }
    }
    paths
}

/// The module a path names: its longest prefix that is a module, else the crate root (`lib`).
fn module_of(path: &[String], modules: &BTreeMap<String, PathBuf>) -> String {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|name| modules.contains_key(name))
        .unwrap_or_else(|| "lib".to_owned())
}

/// Every edge `from → to` between two modules, with a line that shows it.
fn edges() -> (BTreeMap<String, PathBuf>, BTreeMap<(String, String), String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    let mut edges = BTreeMap::new();
    for (name, file) in &modules {
        let code = code(&std::fs::read_to_string(file).unwrap());
        for path in crate_paths(&code) {
            let to = module_of(&path, &modules);
            if &to != name {
                edges.entry((name.clone(), to)).or_insert_with(|| format!("crate::{}", path.join("::")));
            }
        }
    }
    (modules, edges)
}

#[test]
fn the_use_tree_reader_reads_groups_and_paths() {
    let names: Vec<String> = expand("a::{b, c::{d, e as f}}").iter().map(|p| p.join("::")).collect();
    assert_eq!(names, ["a::b", "a::c::d", "a::c::e"]);
    let paths = crate_paths("use crate::a::{b, c::{d, e}};\nfn f() { crate::x::y(); crate::Z }\n");
    let names: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(names, ["a::b", "a::c::d", "a::c::e", "x::y", "Z"]);
    assert_eq!(code("let a = \"//\"; // no crate::x\n"), "let a = \"//\"; \n");
}

#[test]
fn every_module_has_a_layer() {
    let (modules, _) = edges();
    let listed: BTreeSet<&str> = LAYERS.iter().flat_map(|(_, names)| names.iter().copied()).collect();
    let missing: Vec<&String> = modules.keys().filter(|m| !listed.contains(m.as_str())).collect();
    assert!(missing.is_empty(), "modules with no layer in LAYERS: {missing:?}");
    let gone: Vec<&&str> = listed.iter().filter(|m| !modules.contains_key(**m)).collect();
    assert!(gone.is_empty(), "LAYERS names modules that are not in src/: {gone:?}");
}

#[test]
fn no_module_uses_one_of_a_layer_above() {
    let (_, edges) = edges();
    let layer = |module: &str| LAYERS.iter().position(|(_, names)| names.contains(&module));
    let up: Vec<String> = edges
        .iter()
        .filter_map(|((from, to), example)| {
            let (Some(f), Some(t)) = (layer(from), layer(to)) else { return None };
            (t > f).then(|| format!("{from} ({}) uses {to} ({}): {example}", LAYERS[f].0, LAYERS[t].0))
        })
        .collect();
    assert!(up.is_empty(), "{} imports run up the layers:\n{}", up.len(), up.join("\n"));
}

#[test]
fn the_modules_import_one_another_without_a_loop() {
    let (modules, edges) = edges();
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        out.entry(from.as_str()).or_default().push(to.as_str());
    }
    // Depth-first, remembering the path: a module met again on it closes a loop.
    fn visit<'a>(
        module: &'a str,
        out: &BTreeMap<&'a str, Vec<&'a str>>,
        done: &mut BTreeSet<&'a str>,
        path: &mut Vec<&'a str>,
        loops: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|m| *m == module) {
            loops.push(path[at..].iter().chain([&module]).copied().collect::<Vec<_>>().join(" → "));
            return;
        }
        if !done.insert(module) {
            return;
        }
        path.push(module);
        for next in out.get(module).into_iter().flatten() {
            visit(next, out, done, path, loops);
        }
        path.pop();
    }
    let mut loops = Vec::new();
    let mut done = BTreeSet::new();
    for module in modules.keys() {
        visit(module, &out, &mut done, &mut Vec::new(), &mut loops);
    }
    assert!(loops.is_empty(), "import loops:\n{}", loops.join("\n"));
}
