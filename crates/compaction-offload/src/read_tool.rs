//! The read-back tool: lets the model fetch an offloaded result, whole or by line range.

use compaction_model::{JsonObject, Message, ToolCall, ToolSpec};
use serde_json::{json, Value};

use crate::store::{AsyncToolResultStore, StoredContent, ToolResultStore};

/// The read-back tool's name.
pub const READ_TOOL_NAME: &str = "read_offloaded_result";

/// The read-back tool as the model sees it: takes `reference` (the quoted reference in a pointer)
/// and optional 1-based, inclusive `start_line` and `end_line`.
pub fn read_tool_spec() -> ToolSpec {
    ToolSpec::new(
        READ_TOOL_NAME,
        "Read back a tool result that was offloaded to storage. Pass the reference quoted in the \
         pointer that replaced the result; optionally pass start_line and end_line (1-based, \
         inclusive) to read only part of a long result.",
        json!({
            "type": "object",
            "properties": {
                "reference": {"type": "string", "description": "The reference quoted in the pointer."},
                "start_line": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)."},
                "end_line": {"type": "integer", "minimum": 1, "description": "Last line to return (inclusive)."}
            },
            "required": ["reference"],
            "additionalProperties": false
        }),
    )
}

/// What the read-back tool answers: the text for the model and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResponse {
    /// The content, or a plain explanation of why there is none.
    pub text: String,
    /// Whether the call failed (bad arguments, unknown reference, binary content).
    pub error: bool,
}

impl ReadResponse {
    fn ok(text: String) -> Self {
        ReadResponse { text, error: false }
    }

    fn fail(text: String) -> Self {
        ReadResponse { text, error: true }
    }

    /// The response as the tool message answering `call`.
    pub fn into_message(self, call: ToolCall) -> Message {
        Message::tool(self.text, call, self.error)
    }
}

/// Serves a call of the read-back tool from `store`. Never panics: bad arguments, unknown
/// references, refused entries and binary content are answered in words the model can act on.
pub fn read_offloaded_result(store: &dyn ToolResultStore, arguments: &JsonObject) -> ReadResponse {
    match parse(arguments) {
        Ok(request) => respond(&request, store.read(request.reference)),
        Err(response) => response,
    }
}

/// [`read_offloaded_result`] for an async store: the read never blocks the calling thread.
pub async fn read_offloaded_result_async(
    store: &dyn AsyncToolResultStore,
    arguments: &JsonObject,
) -> ReadResponse {
    match parse(arguments) {
        Ok(request) => respond(&request, store.read(request.reference).await),
        Err(response) => response,
    }
}

/// A call's arguments, checked.
struct Request<'a> {
    reference: &'a str,
    start: Option<usize>,
    end: Option<usize>,
}

fn parse(arguments: &JsonObject) -> Result<Request<'_>, ReadResponse> {
    let Some(reference) = arguments.get("reference").and_then(Value::as_str) else {
        return Err(ReadResponse::fail(
            "`reference` is required: pass the reference quoted in the pointer.".into(),
        ));
    };
    let line = |key: &str| -> Result<Option<usize>, ReadResponse> {
        match arguments.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
                _ => Err(ReadResponse::fail(format!("`{key}` must be a whole number of at least 1."))),
            },
        }
    };
    Ok(Request { reference, start: line("start_line")?, end: line("end_line")? })
}

fn respond(request: &Request<'_>, read: Result<StoredContent, crate::Error>) -> ReadResponse {
    let reference = request.reference;
    let text = match read {
        Ok(StoredContent::Text(text)) => text,
        Ok(StoredContent::Bytes(bytes)) => {
            return ReadResponse::fail(format!(
                "'{reference}' holds {} bytes of binary content and cannot be read as text.",
                bytes.len()
            ))
        }
        Err(error) => {
            return ReadResponse::fail(format!(
                "Cannot read '{reference}': {}",
                compaction_core::error_chain(&error)
            ))
        }
    };
    if request.start.is_none() && request.end.is_none() {
        return ReadResponse::ok(text);
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let first = request.start.unwrap_or(1);
    let last = request.end.unwrap_or(lines.len()).min(lines.len());
    if first > lines.len() {
        return ReadResponse::fail(format!(
            "'{reference}' has {} lines; start_line {first} is past the end.",
            lines.len()
        ));
    }
    if first > last {
        return ReadResponse::fail(format!("start_line {first} is after end_line {last}."));
    }
    ReadResponse::ok(lines[first - 1..last].join("\n"))
}
