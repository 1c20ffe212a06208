//! Context compaction for LLM agents: the Compactor trait and the tool-result pruning compactor.
#![deny(missing_docs)]

mod compactor;

pub use compactor::{Compaction, CompactionReport, Compactor, ResultReport};
