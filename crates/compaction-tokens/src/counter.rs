//! The [`TokenCounter`] trait.

use std::fmt;

use compaction_model::{Message, ToolSpec};

/// Measures how many tokens a conversation occupies.
///
/// A counter is object safe and `Send + Sync`, so it can be held as `&dyn TokenCounter` or
/// `Arc<dyn TokenCounter>`, shared between threads and swapped for another backend without
/// touching the code that uses it. Counters measure the text [`crate::rendered_text`] produces,
/// plus a flat charge per image and file.
pub trait TokenCounter: Send + Sync + fmt::Debug {
    /// Tokens that `messages`, sent with the tool schemas `tools`, occupy. `0` when both are empty.
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize;

    /// Counts `messages` as a whole and each message on its own, in one pass where the backend
    /// allows it. `each[i]` equals `count(&messages[i..=i], &[])` and `total` equals
    /// `count(messages, &[])`.
    fn count_each(&self, messages: &[Message]) -> Counts {
        Counts {
            total: self.count(messages, &[]),
            each: messages.iter().map(|m| self.count(std::slice::from_ref(m), &[])).collect(),
        }
    }

    /// A short description such as `approximate:4` or `tiktoken:o200k_base`, for reports.
    fn describe(&self) -> String;
}

/// The result of [`TokenCounter::count_each`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counts {
    /// Tokens of the whole conversation.
    pub total: usize,
    /// Tokens of each message counted on its own.
    pub each: Vec<usize>,
}

impl<T: TokenCounter + ?Sized> TokenCounter for &T {
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
        (**self).count(messages, tools)
    }
    fn count_each(&self, messages: &[Message]) -> Counts {
        (**self).count_each(messages)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for Box<T> {
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
        (**self).count(messages, tools)
    }
    fn count_each(&self, messages: &[Message]) -> Counts {
        (**self).count_each(messages)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for std::sync::Arc<T> {
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
        (**self).count(messages, tools)
    }
    fn count_each(&self, messages: &[Message]) -> Counts {
        (**self).count_each(messages)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}
