//! Counting a conversation that grows, without measuring it all again at every step.

use compaction_model::{Message, ToolSpec};

use crate::counter::{Measure, TokenCounter};

/// The running measure of a conversation's messages, for counters whose counts add up message
/// by message ([`TokenCounter::measure_joined`] returns `Some`).
///
/// An agent loop appends messages and counts the whole conversation before every model call.
/// Counting from scratch makes a long run quadratic; with a `RunningCount` each step measures
/// only the messages added since the last one. The caller promises that the messages it has
/// already passed are unchanged: after rewriting any of them (a compaction), call
/// [`RunningCount::clear`].
///
/// ```
/// use compaction_model::Message;
/// use compaction_tokens::{ApproximateTokenCounter, RunningCount, TokenCounter};
///
/// let counter = ApproximateTokenCounter::default();
/// let mut messages = vec![Message::user("Hello")];
/// let mut running = RunningCount::default();
/// assert_eq!(running.count(&counter, &messages, &[]), counter.count(&messages, &[]));
/// messages.push(Message::assistant("Hi! How can I help?"));
/// assert_eq!(running.count(&counter, &messages, &[]), counter.count(&messages, &[]));
/// ```
#[derive(Debug, Clone, Default)]
pub struct RunningCount {
    /// The summed measure of `measured` messages, each followed by the next.
    sum: Measure,
    /// How many leading messages `sum` covers.
    measured: usize,
    /// The counter `sum` was measured with.
    counter: Option<String>,
}

impl RunningCount {
    /// Forgets everything measured, after the messages were rewritten.
    pub fn clear(&mut self) {
        *self = RunningCount::default();
    }

    /// How many leading messages are measured.
    pub fn measured(&self) -> usize {
        self.measured
    }

    /// Tokens of `messages` sent with `tools`, equal to `counter.count(messages, tools)`,
    /// measuring only messages not measured before. Falls back to a full count for counters that
    /// do not add up, when the conversation got shorter, or when the counter changed.
    pub fn count(&mut self, counter: &dyn TokenCounter, messages: &[Message], tools: &[ToolSpec]) -> usize {
        let Some((last, rest)) = messages.split_last() else {
            self.clear();
            return counter.count(messages, tools);
        };
        let description = counter.describe();
        if self.counter.as_deref() != Some(description.as_str()) || self.measured > rest.len() {
            *self = RunningCount { counter: Some(description), ..RunningCount::default() };
        }
        for message in &rest[self.measured..] {
            match counter.measure_joined(message) {
                Some(measure) => self.sum += measure,
                None => {
                    self.clear();
                    return counter.count(messages, tools);
                }
            }
            self.measured += 1;
        }
        counter.count_after(self.sum, last, tools)
    }
}
