//! Hooks.
#![deny(missing_docs)]
