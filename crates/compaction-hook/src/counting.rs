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
use compaction_tokens::{Additive, Counts, Measure, TokenCounter};

use crate::state::AgentState;

/// A counter that answers from `state`'s running count for the state's own messages, and from
/// `inner` for anything else. Its answers equal `inner`'s.
pub(crate) struct StateCounter<'a> {
    inner: &'a dyn TokenCounter,
    /// `inner`'s additive measuring: the running count answers only for a counter that has it.
    additive: Option<&'a dyn Additive>,
    state: &'a AgentState,
}

impl std::fmt::Debug for StateCounter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateCounter").field("inner", &self.inner.describe()).finish_non_exhaustive()
    }
}

impl<'a> StateCounter<'a> {
    pub(crate) fn new(inner: &'a dyn TokenCounter, state: &'a AgentState) -> Self {
        StateCounter { inner, additive: inner.additive(), state }
    }

    /// Where `messages` lies in the state's conversation, if it is a stretch of it and the
    /// running count can answer for it (the counter's counts add up).
    fn locate(&self, messages: &[Message]) -> Option<Range<usize>> {
        self.additive?;
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
}

// A counter whose counts add up cannot fail, so the running count's answers are `Ok`; any other
// counter is asked itself, through its fallible counts.
impl TokenCounter for StateCounter<'_> {
    fn try_count(&self, messages: &[Message], tools: &[ToolSpec]) -> Result<usize, compaction_tokens::Error> {
        match self.locate(messages) {
            Some(range) if range.len() == 1 && tools.is_empty() => {
                Ok(self.state.own_count(self.inner, range.start))
            }
            Some(range) => Ok(self.state.count_range(self.inner, range, tools)),
            None => self.inner.try_count(messages, tools),
        }
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn try_count_each(&self, messages: &[Message]) -> Result<Counts, compaction_tokens::Error> {
        match self.locate(messages) {
            Some(range) => Ok(self.state.count_each_range(self.inner, range)),
            None => self.inner.try_count_each(messages),
        }
    }

    fn additive(&self) -> Option<&dyn Additive> {
        self.additive.map(|_| self as &dyn Additive)
    }

    fn try_count_rewritten(
        &self,
        messages: &[Message],
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> Result<usize, compaction_tokens::Error> {
        match self.locate(messages) {
            Some(range) => Ok(self.state.count_rewritten_range(self.inner, range, rewritten, tools)),
            None => self.inner.try_count_rewritten(messages, rewritten, tools),
        }
    }
}

// Only handed out (by `additive`) when `inner` has additive measuring, which it forwards to.
impl Additive for StateCounter<'_> {
    fn measure_joined(&self, message: &Message) -> Measure {
        self.additive.map_or_else(Measure::default, |additive| additive.measure_joined(message))
    }

    fn count_after(&self, before: Measure, last: &Message, tools: &[ToolSpec]) -> usize {
        match self.additive {
            Some(additive) => additive.count_after(before, last, tools),
            None => self.inner.count(std::slice::from_ref(last), tools),
        }
    }

    fn count_alone(&self, joined: Measure) -> Option<usize> {
        self.additive?.count_alone(joined)
    }

    /// The counts from the running count for the state's own messages, without the measures
    /// (the running count keeps them), so that what a compactor counts next is asked of this
    /// counter, which answers from the running count too.
    fn count_each_measured(&self, messages: &[Message]) -> (Counts, Option<Vec<Measure>>) {
        match (self.locate(messages), self.additive) {
            (Some(range), _) => (self.state.count_each_range(self.inner, range), None),
            (None, Some(additive)) => additive.count_each_measured(messages),
            (None, None) => (self.inner.count_each(messages), None),
        }
    }
}
