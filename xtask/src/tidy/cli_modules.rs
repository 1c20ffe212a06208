//! The command's modules (compaction-cli's `src/`) import one another without a circle: each
//! command builds on the shared modules (options, strategy, input, output, text...), and no
//! shared module reaches back into a command. No command uses another either.

use super::modules::{circles, edges, shown};
use crate::project_root;

#[test]
fn the_command_modules_import_one_another_without_a_circle() {
    let src = project_root().join("crates/compaction-cli/src");
    let edges = edges(&src).unwrap_or_else(|error| panic!("{error}"));
    // The reader finds the edges it must: a command on a shared module, the root on a command.
    for (from, to) in
        [("commands::prune", "strategy"), ("commands::prune", "commands"), ("", "commands::prune")]
    {
        assert!(edges.contains_key(&(from.to_owned(), to.to_owned())), "no edge {from:?} → {to:?} found");
    }
    let found: Vec<String> = circles(&edges).iter().map(|c| shown(c, &edges, "main")).collect();
    assert!(
        found.is_empty(),
        "Architecture Invariant broken: compaction-cli's modules import in a circle (move what both \
         need into a leaf such as options.rs or text.rs):\n{}",
        found.join("\n")
    );
}

/// The commands share what they share through the modules beside them, never through one
/// another: `simulate` does not reach into `offload` for its options.
#[test]
fn no_command_uses_another() {
    let src = project_root().join("crates/compaction-cli/src");
    let edges = edges(&src).unwrap_or_else(|error| panic!("{error}"));
    let command =
        |m: &str| m.strip_prefix("commands::").map(|rest| rest.split("::").next().unwrap_or(rest).to_owned());
    let crossing: Vec<String> = edges
        .iter()
        .filter(|((from, to), _)| matches!((command(from), command(to)), (Some(a), Some(b)) if a != b))
        .map(|((from, _), example)| format!("{from} uses {example}"))
        .collect();
    assert!(
        crossing.is_empty(),
        "Architecture Invariant broken: a command uses another (move what they share to options.rs, \
         text.rs, error.rs or commands/mod.rs):\n{}",
        crossing.join("\n")
    );
}
