//! The crate's one error type.

/// What went wrong pricing a replay.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A price table is not the JSON it should be.
    #[error("the price table {name} is not valid: {problem}")]
    Prices {
        /// The table's name (a file, or "bundled").
        name: String,
        /// What is wrong, and where.
        problem: String,
        /// The JSON error, when the text is not JSON of the table's shape.
        #[source]
        source: Option<serde_json::Error>,
    },
    /// No row of the price table matches a model.
    #[error("no price for the model {model:?} (call {step}): the price table has no row matching it")]
    NoPrice {
        /// The model name.
        model: String,
        /// The call (1 for the first) that named it.
        step: usize,
    },
    /// A call names no model, and none was given.
    #[error("call {step} names no model: give the model to price it by")]
    NoModel {
        /// The call (1 for the first).
        step: usize,
    },
}
