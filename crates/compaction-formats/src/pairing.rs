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
    call: ToolCall,
    answered: Answered,
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
        self.calls.push(Open { call, answered: Answered::No });
    }

    /// The call a result with `id` answers: the nearest unanswered call with that id, else the
    /// nearest answered one (a second result for one call). Without an id, the nearest
    /// unanswered call. `None` when no call fits.
    pub(crate) fn answer(&mut self, id: Option<&str>) -> Option<ToolCall> {
        let open = self.find(id)?;
        if open.answered == Answered::No {
            open.answered = Answered::Yes;
        }
        Some(open.call.clone())
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
                open.answered = Answered::Taken(by);
                // Only the id is looked at again.
                let shell = ToolCall { id: open.call.id.clone(), ..ToolCall::default() };
                Some(Answer::Call(std::mem::replace(&mut open.call, shell)))
            }
        }
    }

    /// Where the call a result with `id` answers is (see [`OpenCalls::answer`]).
    fn find(&mut self, id: Option<&str>) -> Option<&mut Open> {
        let position = match id {
            Some(id) => {
                let same = |open: &Open| open.call.id.as_deref() == Some(id);
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
