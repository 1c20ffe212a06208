//! Compactors.
#![deny(missing_docs)]
