//! Integration tests of compaction-adapters: round trips through each framework's types on the
//! committed conversations (Haystack fixtures, the bundled transcripts, excerpts of real runs).

#[cfg(feature = "genai")]
mod genai;
#[cfg(feature = "async-openai")]
mod openai;
#[cfg(feature = "rig")]
mod rig;

mod corpus;

pub use corpus::{assert_round_trip, assert_round_trip_by, corpus, Corpus};
