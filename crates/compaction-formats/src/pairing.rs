//! Pairing each tool result with the call it answers.

use compaction_model::ToolCall;

/// The tool calls seen so far in a conversation, and which of them have been answered.
///
/// Ids are not unique in every transcript (tau-bench reuses `tool_call_id`s inside one
/// conversation), so a result answers the nearest unanswered call before it with its id.
#[derive(Debug, Default)]
pub(crate) struct OpenCalls {
    calls: Vec<Open>,
}

/// A call seen, and whether a result answered it.
#[derive(Debug)]
struct Open {
    call: Held,
    answered: Answered,
}

/// A call as [`OpenCalls`] holds it: boxed, since a `ToolCall` is a few hundred bytes and a long
/// log has a call every few kilobytes; once taken ([`OpenCalls::take_answer`]), only its id.
#[derive(Debug)]
enum Held {
    Call(Box<ToolCall>),
    Taken { id: Option<String> },
}

impl Open {
    fn id(&self) -> Option<&str> {
        match &self.call {
            Held::Call(call) => call.id.as_deref(),
            Held::Taken { id } => id.as_deref(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answered {
    No,
    /// Answered; the call is still here.
    Yes,
    /// Answered by the result of the message with this index, which took the call; only its id
    /// is left here.
    Taken(usize),
}

/// The call a result answers, as [`OpenCalls::take_answer`] gives it.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // matched at once where it is made; a box would cost an allocation a call
pub(crate) enum Answer {
    /// The call itself, answered for the first time.
    Call(ToolCall),
    /// A call answered before, by the result of the message with this index, which holds it.
    Again(usize),
}

impl OpenCalls {
    /// Records a call.
    pub(crate) fn push(&mut self, call: &ToolCall) {
        self.push_owned(call.clone());
    }

    /// Records a call, given a copy of it.
    pub(crate) fn push_owned(&mut self, call: ToolCall) {
        self.calls.push(Open { call: Held::Call(Box::new(call)), answered: Answered::No });
    }

    /// The call a result with `id` answers: the nearest unanswered call with that id, else the
    /// nearest answered one (a second result for one call). Without an id, the nearest
    /// unanswered call. `None` when no call fits.
    pub(crate) fn answer(&mut self, id: Option<&str>) -> Option<ToolCall> {
        let open = self.find(id)?;
        let Held::Call(call) = &open.call else {
            // Only calls answered by `take_answer` are taken, and a reader uses one or the other.
            return None;
        };
        if open.answered == Answered::No {
            open.answered = Answered::Yes;
        }
        Some(ToolCall::clone(call))
    }

    /// As [`OpenCalls::answer`], for a reader that keeps its messages at hand: a call answered
    /// for the first time is moved out, not copied, and the result of message `by` is noted as
    /// its holder, where a second result for it finds it. Calls of one reader are either all
    /// answered this way or all by [`OpenCalls::answer`].
    pub(crate) fn take_answer(&mut self, id: Option<&str>, by: usize) -> Option<Answer> {
        let open = self.find(id)?;
        match open.answered {
            Answered::Taken(holder) => Some(Answer::Again(holder)),
            Answered::No | Answered::Yes => {
                // Only the id is looked at again.
                let taken = Held::Taken { id: open.id().map(str::to_owned) };
                let Held::Call(call) = std::mem::replace(&mut open.call, taken) else {
                    return None;
                };
                open.answered = Answered::Taken(by);
                Some(Answer::Call(*call))
            }
        }
    }

    /// Where the call a result with `id` answers is (see [`OpenCalls::answer`]).
    fn find(&mut self, id: Option<&str>) -> Option<&mut Open> {
        let position = match id {
            Some(id) => {
                let same = |open: &Open| open.id() == Some(id);
                self.calls
                    .iter()
                    .rposition(|open| open.answered == Answered::No && same(open))
                    .or_else(|| self.calls.iter().rposition(same))
            }
            None => self.calls.iter().rposition(|open| open.answered == Answered::No),
        }?;
        self.calls.get_mut(position)
    }
}

/// The error for a result no call fits.
pub(crate) fn unpaired(id: Option<&str>) -> String {
    match id {
        Some(id) => format!(
            "a tool result for call id {}, but no tool call before it has that id",
            crate::error::snippet(id)
        ),
        None => "a tool result without a call id, and no unanswered tool call before it".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    /// Memory: every call a long log makes stays listed to the end of the reading, so a listed
    /// call is a box and, once its result took it, an id: not a `ToolCall` of a few hundred
    /// bytes each (issue 31, item 13).
    #[test]
    fn a_listed_call_is_small() {
        assert!(std::mem::size_of::<super::Open>() <= 48, "{}", std::mem::size_of::<super::Open>());
    }
}
