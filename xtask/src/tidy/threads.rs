//! Threads the caller controls: library code starts threads only through
//! `compaction_model::parallel`, which a library user bounds (`set_max_threads`,
//! `with_max_threads`). The I/O crates keep theirs: compaction-offload's store calls that must
//! not block an async runtime, compaction-llm's requests in flight (bounded by its own
//! `concurrency` setting), and the command, which uses every core.

use std::path::Path;

use super::{code_text, visit};
use crate::project_root;

/// Library crates whose threads go through `compaction_model::parallel`.
const THROUGH_PARALLEL: &[&str] = &[
    "compaction-model",
    "compaction-formats",
    "compaction-tokens",
    "compaction-core",
    "compaction-hook",
    "compaction-replay",
    "compaction-adapters",
];

/// The one file that starts threads itself.
const THE_PLACE: &str = "crates/compaction-model/src/parallel.rs";

/// What in code starts a thread or asks how many cores there are.
const THREAD_MARKERS: &[&str] =
    &["thread::scope", "thread::spawn", "thread::Builder", "available_parallelism"];

fn thread_markers_in(path: &Path, text: &str) -> Vec<&'static str> {
    let code = code_text(path, text).unwrap_or_else(|error| panic!("{error}"));
    THREAD_MARKERS.iter().copied().filter(|marker| code.contains(marker)).collect()
}

#[test]
fn library_threads_start_only_in_the_models_parallel() {
    for krate in THROUGH_PARALLEL {
        visit(&project_root().join("crates").join(krate).join("src"), &mut |path| {
            let relative =
                path.strip_prefix(project_root()).unwrap_or(path).to_string_lossy().replace('\\', "/");
            if relative == THE_PLACE {
                return;
            }
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let found = thread_markers_in(path, &text);
            assert!(
                found.is_empty(),
                "Architecture Invariant broken: {relative} uses {found:?}; start threads with compaction_model::parallel"
            );
        });
    }
}

#[test]
fn a_thread_started_however_imported_is_caught() {
    let path = Path::new("crates/compaction-core/src/example.rs");
    let imported = "//! Spreads.\nuse std::thread;\nfn f() { thread::scope(|s| { s.spawn(|| ()); }); }\n";
    assert_eq!(thread_markers_in(path, imported), ["thread::scope"]);
    let cores =
        "//! Asks.\nfn f() -> usize { std::thread::available_parallelism().map_or(1, |n| n.get()) }\n";
    assert_eq!(thread_markers_in(path, cores), ["available_parallelism"]);
    let talks = "//! Uses `std::thread::scope` in the docs only.\nfn f() {}\n";
    assert!(thread_markers_in(path, talks).is_empty());
}
