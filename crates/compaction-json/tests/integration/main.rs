//! The one integration-test binary of compaction-json: each module a part of the crate, held
//! beside serde_json where serde_json has an answer.

mod differential;
mod python;
mod scan;
