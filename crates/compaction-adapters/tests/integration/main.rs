//! Integration tests of compaction-adapters: round trips through each framework's types on the
//! committed conversations (Haystack fixtures, the bundled transcripts, excerpts of real runs).

#[cfg(feature = "rig")]
mod rig;

mod corpus;

pub use corpus::{assert_round_trip, corpus, Corpus};
