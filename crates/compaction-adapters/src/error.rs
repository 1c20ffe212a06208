//! The one error type of this crate.

use thiserror::Error;

use crate::Loss;

/// Why a conversion was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// A conversion asked to be lossless ([`Conversion::into_lossless`](crate::Conversion::into_lossless))
    /// would lose something.
    #[error("the conversion would lose {} field(s); the first: {}", losses.len(), first(losses))]
    Lossy {
        /// Everything that would be lost, in message order.
        losses: Vec<Loss>,
    },
}

fn first(losses: &[Loss]) -> String {
    losses.first().map(ToString::to_string).unwrap_or_default()
}
