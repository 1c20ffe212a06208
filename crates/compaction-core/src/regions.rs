//! The landmarks a conversation is read by, shared by the strategies that remove or replace
//! whole messages (sliding window, summarization): the leading system block, the user message
//! that anchors the current task, the historical turns before it and the agent steps after it.
//!
//! A message a compactor produced (it carries `context_compaction` in its meta) is never a
//! landmark: a system note does not end the leading block early, and a note or summary in the
//! user role does not start a turn or anchor the task.

use std::ops::Range;

use compaction_model::{Message, Role, CONTEXT_COMPACTION};
use compaction_tokens::{Additive, Measure, TokenCounter};
use serde_json::Value;

use crate::error::Error;
use crate::steps::agent_step_spans;

/// Where the leading block of system messages ends: the index of the first message that is not
/// a system message, or is one a compactor produced; the length when there is none.
pub fn leading_system_end(messages: &[Message]) -> usize {
    messages
        .iter()
        .position(|m| !m.is_from(Role::System) || m.meta.contains_key(CONTEXT_COMPACTION))
        .unwrap_or(messages.len())
}

/// The index of the latest user message no compactor produced: the message that anchors the
/// current task. `None` when there is none.
pub fn latest_user_index(messages: &[Message]) -> Option<usize> {
    messages.iter().rposition(is_real_user)
}

fn is_real_user(message: &Message) -> bool {
    message.is_from(Role::User) && !message.meta.contains_key(CONTEXT_COMPACTION)
}

/// Whether `message` was produced by the compaction strategy `strategy` (its
/// `context_compaction` marker is an object whose `strategy` is that name) and, when `role` is
/// given, is from that role.
pub fn is_compaction_message(message: &Message, strategy: &str, role: Option<Role>) -> bool {
    let marker = message.meta.get(CONTEXT_COMPACTION).and_then(Value::as_object);
    role.is_none_or(|role| message.is_from(role))
        && marker.and_then(|m| m.get("strategy")).and_then(Value::as_str) == Some(strategy)
}

/// The complete historical turns before the current task, oldest first, as index ranges.
///
/// History runs from `system_end` to `task_index`; a turn starts at a user message no compactor
/// produced and runs up to the next one (or the end of history). Messages of history before its
/// first real user message belong to no turn. Without a task anchor there is no history.
pub fn historical_turn_groups(
    messages: &[Message],
    system_end: usize,
    task_index: Option<usize>,
) -> Vec<Range<usize>> {
    let end = task_index.unwrap_or(system_end).min(messages.len());
    let starts: Vec<usize> = (system_end..end).filter(|&i| is_real_user(&messages[i])).collect();
    starts
        .iter()
        .enumerate()
        .map(|(position, &start)| start..starts.get(position + 1).copied().unwrap_or(end))
        .collect()
}

/// The current task's agent steps, oldest first, as index ranges: each an assistant message and
/// the tool results that directly follow it (see [`agent_step_spans`]), looked for after the
/// task anchor, or after the leading system block when there is none.
pub fn current_agent_step_groups(
    messages: &[Message],
    system_end: usize,
    task_index: Option<usize>,
) -> Vec<Range<usize>> {
    let start = task_index.map_or(system_end, |task| task + 1);
    agent_step_spans(messages, start).into_iter().map(|(first, end)| first..end).collect()
}

/// Counts any selection of a conversation's messages, in order, as if it were a conversation of
/// its own — what the reference does by building a new list for every count.
///
/// For counters whose counts add up message by message ([`TokenCounter::additive`]), each
/// message is measured once and a selection costs a sum; other counters are handed the selected
/// messages (through [`TokenCounter::try_count`], so a counter that fails says so).
pub(crate) struct Sizer<'c> {
    counter: &'c dyn TokenCounter,
    /// The counter's additive measuring, and each message's joined measure, when its counts add
    /// up.
    measures: Option<(&'c dyn Additive, Vec<Measure>)>,
}

impl std::fmt::Debug for Sizer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sizer")
            .field("counter", &self.counter.describe())
            .field("additive", &self.measures.is_some())
            .finish()
    }
}

impl<'c> Sizer<'c> {
    pub(crate) fn new(counter: &'c dyn TokenCounter, messages: &[Message]) -> Self {
        let measures = counter
            .additive()
            .map(|additive| (additive, messages.iter().map(|m| additive.measure_joined(m)).collect()));
        Sizer { counter, measures }
    }

    /// Tokens of the messages at `indices` (in the order given), as one conversation.
    pub(crate) fn count(&self, messages: &[Message], indices: &[usize]) -> Result<usize, Error> {
        let Some((&last, rest)) = indices.split_last() else {
            return self.counter.try_count(&[], &[]).map_err(Error::Count);
        };
        if let Some((additive, measures)) = &self.measures {
            let before = rest.iter().map(|&i| measures[i]).sum();
            return Ok(additive.count_after(before, &messages[last], &[]));
        }
        let contiguous = indices.windows(2).all(|w| w[1] == w[0] + 1);
        let result = if contiguous {
            self.counter.try_count(&messages[indices[0]..=last], &[])
        } else {
            let selected: Vec<Message> = indices.iter().map(|&i| messages[i].clone()).collect();
            self.counter.try_count(&selected, &[])
        };
        result.map_err(Error::Count)
    }

    /// Tokens of a contiguous stretch of messages.
    pub(crate) fn count_range(&self, messages: &[Message], range: Range<usize>) -> Result<usize, Error> {
        if self.measures.is_none() {
            return self.counter.try_count(&messages[range], &[]).map_err(Error::Count);
        }
        self.count(messages, &range.collect::<Vec<_>>())
    }

    /// Tokens of the whole conversation.
    pub(crate) fn count_all(&self, messages: &[Message]) -> Result<usize, Error> {
        self.count_range(messages, 0..messages.len())
    }

    /// Tokens of the conversation without the messages `left_out` marks.
    pub(crate) fn count_except(&self, messages: &[Message], left_out: &[bool]) -> Result<usize, Error> {
        let kept: Vec<usize> = (0..messages.len()).filter(|&i| !left_out[i]).collect();
        self.count(messages, &kept)
    }

    /// The measures after the conversation was rewritten: `kept` (indices into the old one, in
    /// order) with `inserted` placed at `position` of the new one.
    pub(crate) fn rewritten(&self, kept: &[usize], position: usize, inserted: &Message) -> Self {
        let measures = self.measures.as_ref().map(|(additive, measures)| {
            let new = additive.measure_joined(inserted);
            let mut out: Vec<Measure> = kept.iter().map(|&i| measures[i]).collect();
            out.insert(position.min(out.len()), new);
            (*additive, out)
        });
        Sizer { counter: self.counter, measures }
    }
}
