//! Integration tests of compaction-model: conformance with the reference, and bad input.

mod calls;
mod conformance;
mod errors;
mod layout;
mod spellings;

pub use compaction_testkit::python_equal;

/// Every fixture of one kind: the committed ones, plus a differential run's.
pub fn fixture_files(kind: &str) -> Vec<std::path::PathBuf> {
    compaction_testkit::fixture_files(env!("CARGO_MANIFEST_DIR"), kind)
        .into_iter()
        .map(|(_, path)| path)
        .collect()
}
