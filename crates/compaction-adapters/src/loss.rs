//! What a conversion into a framework's types cannot keep: [`Loss`], and [`Conversion`], the
//! converted value together with its losses.
//!
//! Losses are found by converting the result back and comparing it with the input, field by
//! field, so a report names everything that does not survive the round trip — not only what the
//! converter knew it was dropping.

use std::fmt;

use crate::Error;

/// One field of one message that does not come back unchanged from the framework's types.
///
/// `message` is the index of the message in the conversation that was converted; `part` the
/// index of the content part in that message, when the loss concerns one part. `field` names
/// what is lost in the terms of the Haystack wire format (`name`, `role`, `meta.usage`,
/// `tool_call.extra`, `image.validation`, `tool_call_result.origin.arguments`, …); `part` alone
/// means the whole part. [`Loss::BOUNDARY`] means the message does not come back as a message of
/// its own: it is split into several, or merged with a neighbour; [`Loss::PART_ORDER`] that its
/// parts come back in another order; [`Loss::CONTENT`] that it comes back with parts it did not
/// have.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Loss {
    /// Index of the message in the converted conversation.
    pub message: usize,
    /// Index of the part in that message, when the loss concerns one part.
    pub part: Option<usize>,
    /// What is lost: a field path, `part` for a whole part, or [`Loss::BOUNDARY`].
    pub field: String,
}

impl Loss {
    /// The `field` of a message that does not come back as one message of its own.
    pub const BOUNDARY: &'static str = "message boundary";

    /// The `field` of a part that is dropped, or comes back as another kind of part.
    pub const PART: &'static str = "part";

    /// The `field` of a message that comes back with parts it did not have.
    pub const CONTENT: &'static str = "content";

    /// The `field` of a message whose parts come back in another order.
    pub const PART_ORDER: &'static str = "part order";

    pub(crate) fn message(message: usize, field: impl Into<String>) -> Self {
        Loss { message, part: None, field: field.into() }
    }

    pub(crate) fn part(message: usize, part: usize, field: impl Into<String>) -> Self {
        Loss { message, part: Some(part), field: field.into() }
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.part {
            Some(part) => write!(f, "message {}, part {}: `{}` is not kept", self.message, part, self.field),
            None => write!(f, "message {}: `{}` is not kept", self.message, self.field),
        }
    }
}

/// A converted value and what the conversion could not keep.
///
/// Converting into a framework's types can lose what those types have no place for (a
/// message's `meta`, an image's validation flag, a tool result's error flag, …). The value is
/// always produced; [`Conversion::losses`] says what is missing from it and where. Use
/// [`Conversion::into_lossless`] to treat any loss as an error, or [`Conversion::into_value`] to
/// accept them.
#[derive(Debug, Clone)]
#[must_use = "a conversion reports losses that should be looked at"]
pub struct Conversion<T> {
    value: T,
    losses: Vec<Loss>,
}

impl<T> Conversion<T> {
    pub(crate) fn new(value: T, losses: Vec<Loss>) -> Self {
        Conversion { value, losses }
    }

    /// The converted value, borrowed.
    pub fn value(&self) -> &T {
        &self.value
    }

    /// What does not survive the conversion, in message order.
    pub fn losses(&self) -> &[Loss] {
        &self.losses
    }

    /// Whether everything survives.
    pub fn is_lossless(&self) -> bool {
        self.losses.is_empty()
    }

    /// The converted value, accepting any losses.
    pub fn into_value(self) -> T {
        self.value
    }

    /// The value and the losses.
    pub fn into_parts(self) -> (T, Vec<Loss>) {
        (self.value, self.losses)
    }

    /// The converted value, or [`Error::Lossy`] listing the losses when there are any.
    ///
    /// # Errors
    ///
    /// [`Error::Lossy`] when the conversion lost anything.
    pub fn into_lossless(self) -> Result<T, Error> {
        if self.losses.is_empty() {
            Ok(self.value)
        } else {
            Err(Error::Lossy { losses: self.losses })
        }
    }
}
