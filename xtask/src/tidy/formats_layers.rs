//! compaction-formats' modules stand in layers: plain data at the bottom, then helpers several
//! formats share, one module per format, and the pipeline that tells a format and dispatches to
//! it. A module may use modules of its own layer or below, never above, and no import goes round
//! in a circle. The edges come from `modules`, read with `syn`.

use std::collections::BTreeSet;

use super::modules::{circles, edges, modules, shown};
use crate::project_root;

/// The layers, lowest first, and the modules in each (the crate root is `lib`). A new module gets
/// a line here.
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
            "codec",
            "document",
            "eventlog",
            "form",
            "inplace",
            "itemsback",
            "logback",
            "overlay",
            "pairing",
            "shapes",
            "style",
            "tree",
        ],
    ),
    // One module per format (a format may build on another: Claude Code on Anthropic).
    (
        "formats",
        &[
            "anthropic",
            "claude_code",
            "codex",
            "haystack",
            "messages",
            "openai",
            "openhands",
            "request",
            "responses",
        ],
    ),
    // Telling the format, the table of formats, reading and writing.
    ("pipeline and dispatch", &["detect", "formats", "ids", "pipeline", "read", "write"]),
    // The crate's docs and re-exports, and its unit tests.
    ("lib", &["lib", "tests"]),
];

fn src() -> std::path::PathBuf {
    project_root().join("crates/compaction-formats/src")
}

/// A module's name as `LAYERS` spells it: the crate root is `lib`.
fn listed_as(module: &str) -> &str {
    if module.is_empty() {
        "lib"
    } else {
        module
    }
}

#[test]
fn every_formats_module_has_a_layer() {
    let found = modules(&src());
    let found: BTreeSet<&str> = found.keys().map(|m| listed_as(m)).collect();
    let listed: BTreeSet<&str> = LAYERS.iter().flat_map(|(_, names)| names.iter().copied()).collect();
    let missing: Vec<&&str> = found.difference(&listed).collect();
    assert!(missing.is_empty(), "compaction-formats modules with no layer in {}: {missing:?}", file!());
    let gone: Vec<&&str> = listed.difference(&found).collect();
    assert!(gone.is_empty(), "{} names modules that are not in compaction-formats' src/: {gone:?}", file!());
}

#[test]
fn no_formats_module_uses_one_of_a_layer_above() {
    let edges = edges(&src()).unwrap_or_else(|error| panic!("{error}"));
    // The reader finds the edges it must: a format on a shared helper, dispatch on a format.
    for (from, to) in [("haystack", "codec"), ("formats", "haystack")] {
        assert!(edges.contains_key(&(from.to_owned(), to.to_owned())), "no edge {from:?} → {to:?} found");
    }
    let layer = |module: &str| LAYERS.iter().position(|(_, names)| names.contains(&listed_as(module)));
    let up: Vec<String> = edges
        .iter()
        .filter_map(|((from, to), example)| {
            let (Some(f), Some(t)) = (layer(from), layer(to)) else { return None };
            let (from, to) = (listed_as(from), listed_as(to));
            (t > f).then(|| format!("{from} ({}) uses {to} ({}): {example}", LAYERS[f].0, LAYERS[t].0))
        })
        .collect();
    assert!(
        up.is_empty(),
        "Architecture Invariant broken: {} compaction-formats imports run up the layers:\n{}",
        up.len(),
        up.join("\n")
    );
}

#[test]
fn the_formats_modules_import_one_another_without_a_circle() {
    let edges = edges(&src()).unwrap_or_else(|error| panic!("{error}"));
    let found: Vec<String> = circles(&edges).iter().map(|c| shown(c, &edges, "lib")).collect();
    assert!(
        found.is_empty(),
        "Architecture Invariant broken: compaction-formats' modules import in a circle:\n{}",
        found.join("\n")
    );
}
