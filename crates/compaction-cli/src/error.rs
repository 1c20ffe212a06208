//! The command's two failures beside bad input, each with its exit status (see `main`): bad
//! usage (2) and a run that wrote its output but not all it was asked to (3). A leaf: every
//! module may use it.

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
