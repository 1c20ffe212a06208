//! The [`TokenCounter`] trait.

use std::fmt;

use compaction_model::{Message, ToolSpec};

/// Measures how many tokens a conversation occupies.
///
/// A counter is object safe and `Send + Sync`, so it can be held as `&dyn TokenCounter` or
/// `Arc<dyn TokenCounter>`, shared between threads and swapped for another backend without
/// touching the code that uses it. Counters measure the text [`crate::rendered_text`] produces,
/// plus a flat charge per image and file.
///
/// A count depends on that rendering and those charges alone. What the rendering leaves out —
/// meta, call ids, the call a tool result answers apart from its tool name, reasoning — never
/// changes it, so a caller may count one message and reuse the count for another that renders
/// alike; the pruning compactor counts one placeholder per tool this way. An implementation of
/// this trait keeps that promise.
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

    /// [`TokenCounter::count_each`], and, for a counter whose counts add up, the joined measure
    /// ([`TokenCounter::measure_joined`]) of every message but the last, from the same pass;
    /// `None` for any other counter (the default).
    ///
    /// A compactor that counts a conversation this way can count what it makes of it with
    /// [`TokenCounter::count_after`] at the cost of the messages it rewrote.
    fn count_each_measured(&self, messages: &[Message]) -> (Counts, Option<Vec<Measure>>) {
        (self.count_each(messages), None)
    }

    /// A short description such as `approximate:4` or `tiktoken:o200k_base`, for reports.
    fn describe(&self) -> String;

    /// [`TokenCounter::count`] for counters that can fail, such as one that asks a provider over
    /// the network. Local counters never fail, and the default returns `count`'s answer.
    ///
    /// Callers that can report a failure (the compaction hook, the command line) count through
    /// this method; a counter that can fail implements it for real and makes `count` its
    /// best effort (documenting what it returns on failure).
    ///
    /// # Errors
    ///
    /// [`Error::Provider`](crate::Error::Provider) when the count could not be had.
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, crate::Error> {
        Ok(self.count(messages, tools))
    }

    /// [`TokenCounter::count_each`] for counters that can fail; see [`TokenCounter::try_count`].
    ///
    /// # Errors
    ///
    /// [`Error::Provider`](crate::Error::Provider) when a count could not be had.
    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, crate::Error> {
        Ok(self.count_each(messages))
    }

    /// What this counter measures of `message` when another message follows it (the joining
    /// newline included), in a form that adds up across messages — or `None` for a counter that
    /// must see the whole text at once (the default).
    ///
    /// With it, a caller that keeps the running sum for a conversation that only grows can count
    /// the whole conversation by measuring just the new messages; see [`TokenCounter::count_after`].
    fn measure_joined(&self, message: &Message) -> Option<Measure> {
        let _ = message;
        None
    }

    /// Tokens of a message counted on its own (`count(&[message], &[])`), told from its joined
    /// measure ([`TokenCounter::measure_joined`]) alone, for a counter that can: then counting
    /// each message of a measured conversation costs no second look at any of them. `None` (the
    /// default) for a counter that must see the message again.
    fn count_alone(&self, joined: Measure) -> Option<usize> {
        let _ = joined;
        None
    }

    /// Tokens of a conversation whose messages before the last add up to `before` (the sum of
    /// [`TokenCounter::measure_joined`] over them), ending with `last`, sent with `tools`.
    /// Equals `count` of the whole conversation. Only meaningful for a counter whose
    /// `measure_joined` returns `Some`; the default ignores `before`.
    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize {
        let _ = before;
        self.count(std::slice::from_ref(last), tools)
    }

    /// Tokens of `messages` with some of them rewritten, sent with `tools`: equals `count` of the
    /// conversation in which `messages[i]` is `replacement` for every `(i, replacement)` of
    /// `rewritten` (indices in increasing order, each once; one out of range is ignored), without
    /// building that conversation.
    ///
    /// A compactor uses it to count what it made without copying the conversation. The default
    /// measures every message with [`TokenCounter::measure_joined`] where the counts add up, and
    /// otherwise counts a copy. A counter that keeps the measures of a conversation (a running
    /// count) answers from them, measuring only the rewritten messages.
    fn count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> usize {
        let Some(last) = messages.len().checked_sub(1) else {
            return self.count(&[], tools);
        };
        if rewritten.is_empty() {
            return self.count(messages, tools);
        }
        let message = |index: usize| match rewritten.binary_search_by_key(&index, |(i, _)| *i) {
            Ok(at) => rewritten[at].1,
            Err(_) => &messages[index],
        };
        let mut before = Measure::default();
        for index in 0..last {
            match self.measure_joined(message(index)) {
                Some(measure) => before += measure,
                None => {
                    let copy: Vec<Message> = (0..=last).map(|i| message(i).clone()).collect();
                    return self.count(&copy, tools);
                }
            }
        }
        self.count_after(before, message(last), tools)
    }
}

/// An additive measurement of messages: text (characters or tokens, as the counter measures
/// it), and the images and files that carry a flat charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Measure {
    /// Text units: characters for the approximate counter, tokens for tiktoken.
    pub text: usize,
    /// Images.
    pub images: usize,
    /// Files.
    pub files: usize,
}

impl std::ops::Add for Measure {
    type Output = Measure;
    fn add(self, other: Measure) -> Measure {
        Measure {
            text: self.text + other.text,
            images: self.images + other.images,
            files: self.files + other.files,
        }
    }
}

impl std::ops::AddAssign for Measure {
    fn add_assign(&mut self, other: Measure) {
        *self = *self + other;
    }
}

impl std::iter::Sum for Measure {
    fn sum<I: Iterator<Item = Measure>>(iter: I) -> Measure {
        iter.fold(Measure::default(), |a, b| a + b)
    }
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
    fn count_each_measured(&self, messages: &[Message]) -> (Counts, Option<Vec<Measure>>) {
        (**self).count_each_measured(messages)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, crate::Error> {
        (**self).try_count(messages, tools)
    }
    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, crate::Error> {
        (**self).try_count_each(messages)
    }
    fn measure_joined(&self, message: &Message) -> Option<Measure> {
        (**self).measure_joined(message)
    }
    fn count_alone(&self, joined: Measure) -> Option<usize> {
        (**self).count_alone(joined)
    }
    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize {
        (**self).count_after(before, last, tools)
    }
    fn count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> usize {
        (**self).count_rewritten(messages, rewritten, tools)
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for Box<T> {
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
        (**self).count(messages, tools)
    }
    fn count_each(&self, messages: &[Message]) -> Counts {
        (**self).count_each(messages)
    }
    fn count_each_measured(&self, messages: &[Message]) -> (Counts, Option<Vec<Measure>>) {
        (**self).count_each_measured(messages)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, crate::Error> {
        (**self).try_count(messages, tools)
    }
    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, crate::Error> {
        (**self).try_count_each(messages)
    }
    fn measure_joined(&self, message: &Message) -> Option<Measure> {
        (**self).measure_joined(message)
    }
    fn count_alone(&self, joined: Measure) -> Option<usize> {
        (**self).count_alone(joined)
    }
    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize {
        (**self).count_after(before, last, tools)
    }
    fn count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> usize {
        (**self).count_rewritten(messages, rewritten, tools)
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for std::sync::Arc<T> {
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
        (**self).count(messages, tools)
    }
    fn count_each(&self, messages: &[Message]) -> Counts {
        (**self).count_each(messages)
    }
    fn count_each_measured(&self, messages: &[Message]) -> (Counts, Option<Vec<Measure>>) {
        (**self).count_each_measured(messages)
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, crate::Error> {
        (**self).try_count(messages, tools)
    }
    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, crate::Error> {
        (**self).try_count_each(messages)
    }
    fn measure_joined(&self, message: &Message) -> Option<Measure> {
        (**self).measure_joined(message)
    }
    fn count_alone(&self, joined: Measure) -> Option<usize> {
        (**self).count_alone(joined)
    }
    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize {
        (**self).count_after(before, last, tools)
    }
    fn count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> usize {
        (**self).count_rewritten(messages, rewritten, tools)
    }
}
