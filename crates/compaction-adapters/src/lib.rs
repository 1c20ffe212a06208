//! Conversions between the message types of Rust agent frameworks and compaction's.
//!
//! (Essay to come.)
#![deny(missing_docs)]

mod diff;
mod error;
mod loss;
#[allow(dead_code)]
mod stash;

#[cfg(feature = "genai")]
#[cfg_attr(docsrs, doc(cfg(feature = "genai")))]
pub mod genai;
#[cfg(feature = "async-openai")]
#[cfg_attr(docsrs, doc(cfg(feature = "async-openai")))]
pub mod openai;
#[cfg(feature = "rig")]
#[cfg_attr(docsrs, doc(cfg(feature = "rig")))]
pub mod rig;

pub use error::Error;
pub use loss::{Conversion, Loss};
