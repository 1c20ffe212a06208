//! The approximate counter: characters divided by a fixed ratio.

use compaction_model::{Message, ToolSpec};

use crate::counter::{Additive, Counts, Measure, TokenCounter};
use crate::error::Error;
use crate::render::{rendered_message_chars, rendered_tools_chars, NonText};

/// Estimates tokens from text length: `floor(characters / chars_per_token)`, plus a flat charge
/// per image and file. Needs no tokenizer, so it is the default everywhere.
///
/// Characters are Unicode scalar values, as Python's `len` counts them, and the division is done
/// in `f64` as the reference does it, so counts agree exactly with Haystack's
/// `ApproximateTokenCounter`. The rendering is measured, never built.
#[derive(Debug, Clone, PartialEq)]
pub struct ApproximateTokenCounter {
    chars_per_token: f64,
    tokens_per_image: usize,
    tokens_per_file: usize,
}

impl Default for ApproximateTokenCounter {
    fn default() -> Self {
        ApproximateTokenCounter { chars_per_token: 4.0, tokens_per_image: 85, tokens_per_file: 1000 }
    }
}

impl ApproximateTokenCounter {
    /// A counter with `chars_per_token` characters per token and the default image (85) and file
    /// (1000) charges.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidCharsPerToken`] unless `chars_per_token` is greater than 0.
    pub fn new(chars_per_token: f64) -> Result<Self, Error> {
        if chars_per_token.is_nan() || chars_per_token <= 0.0 {
            return Err(Error::InvalidCharsPerToken(chars_per_token));
        }
        Ok(ApproximateTokenCounter { chars_per_token, ..ApproximateTokenCounter::default() })
    }

    /// The same counter charging `tokens_per_image` per image and `tokens_per_file` per file, as
    /// every counter's `with_charges` does.
    #[must_use]
    pub fn with_charges(mut self, tokens_per_image: usize, tokens_per_file: usize) -> Self {
        self.tokens_per_image = tokens_per_image;
        self.tokens_per_file = tokens_per_file;
        self
    }

    /// Characters per token.
    pub fn chars_per_token(&self) -> f64 {
        self.chars_per_token
    }

    fn text_tokens(&self, chars: usize) -> usize {
        // Python: int(len(text) / chars_per_token), a float division truncated toward zero.
        (chars as f64 / self.chars_per_token) as usize
    }
}

/// From this many messages on, a conversation is measured on two threads ([`sizes`]).
const PARALLEL_MESSAGES: usize = 2048;

/// Each message's rendered length in characters, and its images and files. A long conversation's
/// messages lie all over memory, and the walk over their parts waits on memory more than it
/// computes: from [`PARALLEL_MESSAGES`] on, with two threads allowed, the second half is
/// walked on another thread (12,205 messages: 11–17 ms on one, about half on two). Halves, not
/// `parallel::map`'s small chunks handed out in turn: interleaved, the two threads measured
/// the same messages in 5 ms where halves take 3.
fn sizes(messages: &[Message]) -> Vec<(usize, NonText)> {
    let size = |message: &Message| (rendered_message_chars(message), NonText::of_message(message));
    if messages.len() < PARALLEL_MESSAGES || compaction_model::parallel::max_threads() < 2 {
        return messages.iter().map(size).collect();
    }
    let (first, second) = messages.split_at(messages.len() / 2);
    let (mut all, later) = compaction_model::parallel::join(
        || {
            let mut all: Vec<(usize, NonText)> = Vec::with_capacity(messages.len());
            all.extend(first.iter().map(size));
            all
        },
        || second.iter().map(size).collect::<Vec<_>>(),
    );
    all.extend(later);
    all
}

impl TokenCounter for ApproximateTokenCounter {
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, crate::Error> {
        Ok(self.count(messages, tools))
    }

    fn describe(&self) -> String {
        format!("approximate:{}", self.chars_per_token)
    }

    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, crate::Error> {
        Ok(self.count_each(messages))
    }

    fn additive(&self) -> Option<&dyn Additive> {
        Some(self)
    }

    // The count itself, which cannot fail: the provided `count` would go through `try_count`.
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
        if messages.is_empty() && tools.is_empty() {
            return 0;
        }
        let mut chars = messages.len().saturating_sub(1);
        let mut non_text = NonText::default();
        for (own, kinds) in sizes(messages) {
            chars += own;
            non_text = non_text + kinds;
        }
        chars += rendered_tools_chars(tools);
        self.text_tokens(chars) + non_text.tokens(self.tokens_per_image, self.tokens_per_file)
    }

    fn count_each(&self, messages: &[Message]) -> Counts {
        self.count_each_measured(messages).0
    }
}

impl Additive for ApproximateTokenCounter {
    fn measure_joined(&self, message: &Message) -> Measure {
        let non_text = NonText::of_message(message);
        Measure { text: rendered_message_chars(message) + 1, images: non_text.images, files: non_text.files }
    }

    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize {
        let chars = before.text + rendered_message_chars(last) + rendered_tools_chars(tools);
        let non_text = NonText { images: before.images, files: before.files } + NonText::of_message(last);
        self.text_tokens(chars) + non_text.tokens(self.tokens_per_image, self.tokens_per_file)
    }

    // A message's joined measure is its rendering and the joining newline, and its images and
    // files: alone, it is the same without the newline.
    fn count_alone(&self, joined: Measure) -> Option<usize> {
        let non_text = NonText { images: joined.images, files: joined.files };
        Some(
            self.text_tokens(joined.text.checked_sub(1)?)
                + non_text.tokens(self.tokens_per_image, self.tokens_per_file),
        )
    }

    fn count_each_measured(&self, messages: &[Message]) -> (Counts, Option<Vec<Measure>>) {
        let mut chars = messages.len().saturating_sub(1);
        let mut non_text_total = 0;
        let mut each = Vec::with_capacity(messages.len());
        let mut measures = Vec::with_capacity(messages.len().saturating_sub(1));
        for (index, (own, kinds)) in sizes(messages).into_iter().enumerate() {
            let non_text = kinds.tokens(self.tokens_per_image, self.tokens_per_file);
            chars += own;
            non_text_total += non_text;
            each.push(self.text_tokens(own) + non_text);
            if index + 1 < messages.len() {
                measures.push(Measure { text: own + 1, images: kinds.images, files: kinds.files });
            }
        }
        let total = if messages.is_empty() { 0 } else { self.text_tokens(chars) + non_text_total };
        (Counts { total, each }, Some(measures))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long conversation (measured on two threads) counts as its messages do one by one.
    #[test]
    fn a_long_conversation_counts_as_its_messages_do() {
        let counter = ApproximateTokenCounter::new(3.0).expect("valid");
        let messages: Vec<Message> = (0..PARALLEL_MESSAGES * 2 + 1)
            .map(|i| match i % 3 {
                0 => Message::user("ünïcode ".repeat(i % 11)),
                1 => Message::assistant("x".repeat(i % 17)),
                _ => Message::system("s"),
            })
            .collect();
        let sizes = sizes(&messages);
        assert_eq!(sizes.len(), messages.len());
        for (message, (own, _)) in messages.iter().zip(&sizes) {
            assert_eq!(*own, rendered_message_chars(message));
        }
        let chars: usize = sizes.iter().map(|(own, _)| own).sum::<usize>() + messages.len() - 1;
        assert_eq!(counter.count(&messages, &[]), counter.text_tokens(chars));
        let (counts, measures) = counter.count_each_measured(&messages);
        assert_eq!(counts.total, counter.text_tokens(chars));
        for (message, each) in messages.iter().zip(&counts.each) {
            assert_eq!(*each, counter.count(std::slice::from_ref(message), &[]));
        }
        assert_eq!(measures.map(|m| m.len()), Some(messages.len() - 1));
    }
}
