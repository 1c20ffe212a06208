//! Pairing each tool result with the call it answers.

use compaction_model::ToolCall;

/// The tool calls seen so far in a conversation, and which of them have been answered.
///
/// Ids are not unique in every transcript (tau-bench reuses `tool_call_id`s inside one
/// conversation), so a result answers the nearest unanswered call before it with its id.
#[derive(Debug, Default)]
pub(crate) struct OpenCalls {
    calls: Vec<(ToolCall, bool)>,
}

impl OpenCalls {
    /// Records a call.
    pub(crate) fn push(&mut self, call: &ToolCall) {
        self.push_owned(call.clone());
    }

    /// Records a call, given a copy of it.
    pub(crate) fn push_owned(&mut self, call: ToolCall) {
        self.calls.push((call, false));
    }

    /// The call a result with `id` answers: the nearest unanswered call with that id, else the
    /// nearest answered one (a second result for one call). Without an id, the nearest
    /// unanswered call. `None` when no call fits.
    pub(crate) fn answer(&mut self, id: Option<&str>) -> Option<ToolCall> {
        let position = match id {
            Some(id) => {
                let same = |call: &ToolCall| call.id.as_deref() == Some(id);
                self.calls
                    .iter()
                    .rposition(|(call, answered)| !answered && same(call))
                    .or_else(|| self.calls.iter().rposition(|(call, _)| same(call)))
            }
            None => self.calls.iter().rposition(|(_, answered)| !answered),
        }?;
        self.calls[position].1 = true;
        Some(self.calls[position].0.clone())
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
