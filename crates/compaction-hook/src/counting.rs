//! Counting through the agent state's running count, so that a hook step costs what was
//! appended or rewritten since the last one, not the whole conversation.
//!
//! The hook hands compactors a [`StateCounter`]: a [`TokenCounter`] that answers from the
//! state's [`RunningCount`](compaction_tokens::RunningCount) whenever it is asked about the
//! state's own messages (the whole conversation, a stretch of it, or one message of it) and asks
//! the real counter about anything else (a stand-in, a copy). It tells the state's messages by
//! address: the slice it is given lies inside the state's vector, which cannot change while the
//! counter borrows the state.

use std::ops::Range;

use compaction_model::{Message, ToolSpec};
use compaction_tokens::{Counts, Measure, TokenCounter};

use crate::state::AgentState;

/// A counter that answers from `state`'s running count for the state's own messages, and from
/// `inner` for anything else. Its answers equal `inner`'s.
pub(crate) struct StateCounter<'a> {
    inner: &'a dyn TokenCounter,
    state: &'a AgentState,
}

impl std::fmt::Debug for StateCounter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateCounter").field("inner", &self.inner.describe()).finish_non_exhaustive()
    }
}

impl<'a> StateCounter<'a> {
    pub(crate) fn new(inner: &'a dyn TokenCounter, state: &'a AgentState) -> Self {
        StateCounter { inner, state }
    }

    /// Where `messages` lies in the state's conversation, if it is a stretch of it.
    fn locate(&self, messages: &[Message]) -> Option<Range<usize>> {
        let own = self.state.messages();
        if messages.is_empty() || own.is_empty() {
            return None;
        }
        let size = std::mem::size_of::<Message>();
        let base = own.as_ptr() as usize;
        let at = messages.as_ptr() as usize;
        let offset = at.checked_sub(base)?;
        if offset % size != 0 {
            return None;
        }
        let start = offset / size;
        let end = start.checked_add(messages.len())?;
        (end <= own.len()).then_some(start..end)
    }

    /// Whether this counter's counts add up, so that the running count can answer.
    fn additive(&self) -> bool {
        self.state.messages().first().is_some_and(|m| self.inner.measure_joined(m).is_some())
    }
}

impl TokenCounter for StateCounter<'_> {
    fn count(&self, messages: &[Message], tools: &[ToolSpec]) -> usize {
        match self.locate(messages) {
            Some(range) if range.len() == 1 && tools.is_empty() => {
                self.state.own_count(self.inner, range.start)
            }
            Some(range) => self.state.count_range(self.inner, range, tools),
            None => self.inner.count(messages, tools),
        }
    }

    fn count_each(&self, messages: &[Message]) -> Counts {
        match self.locate(messages) {
            Some(range) => self.state.count_each_range(self.inner, range),
            None => self.inner.count_each(messages),
        }
    }

    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, compaction_tokens::Error> {
        match self.locate(messages) {
            Some(_) if self.additive() => Ok(self.count(messages, tools)),
            _ => self.inner.try_count(messages, tools),
        }
    }

    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, compaction_tokens::Error> {
        match self.locate(messages) {
            Some(_) if self.additive() => Ok(self.count_each(messages)),
            _ => self.inner.try_count_each(messages),
        }
    }

    fn count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> usize {
        match self.locate(messages) {
            Some(range) if self.additive() => {
                self.state.count_rewritten_range(self.inner, range, rewritten, tools)
            }
            _ => self.inner.count_rewritten(messages, rewritten, tools),
        }
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn measure_joined(&self, message: &Message) -> Option<Measure> {
        self.inner.measure_joined(message)
    }

    fn count_alone(&self, joined: Measure) -> Option<usize> {
        self.inner.count_alone(joined)
    }

    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize {
        self.inner.count_after(before, last, tools)
    }
}
