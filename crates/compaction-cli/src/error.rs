//! The command's two failures beside bad input, each with its exit status (see `main`): bad
//! usage (2) and a run that wrote its output but not all it was asked to (3), with the store
//! writes that make a run partial. A leaf: every module may use it.

use anyhow::Result;
use compaction_offload::OffloadFailure;

/// An error in how the command was called, as opposed to in what it read (exit status 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The command did what it could and wrote its output, but not all that was asked: some store
/// writes failed, and each is already named on standard error (exit status 3).
#[derive(Debug)]
pub struct PartialFailure(pub String);

impl std::fmt::Display for PartialFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PartialFailure {}

/// The exit status a run that ends with `ending` has (see `main`): 0, or 3 for a partial failure.
pub fn status(ending: &Result<()>) -> u8 {
    match ending {
        Ok(()) => 0,
        Err(error) if error.downcast_ref::<PartialFailure>().is_some() => 3,
        Err(_) => 1,
    }
}

/// Names every failed store write on standard error: the result, the file's key, and why.
pub fn say_failures(failures: &[OffloadFailure]) {
    for failure in failures {
        let at = failure.at;
        let key = failure.key.as_deref().map_or_else(String::new, |k| format!(" under {k}"));
        eprintln!(
            "offload: could not store the result of {} (message {}{}){key}: {}; it stays in the conversation",
            failure.tool_name,
            at.index,
            if at.position > 0 { format!(", result {}", at.position + 1) } else { String::new() },
            compaction_core::error_chain(&failure.error)
        );
    }
}

/// Exit status 3 when some results could not be stored, once the output is written.
pub fn partial(failures: &[OffloadFailure]) -> Result<()> {
    let mut results: Vec<_> = failures.iter().map(|f| (f.at.index, f.at.position)).collect();
    results.dedup();
    match results.len() {
        0 => Ok(()),
        n => Err(PartialFailure(format!(
            "{n} tool result{} could not be offloaded and stayed in the conversation (named above)",
            if n == 1 { "" } else { "s" }
        ))
        .into()),
    }
}
