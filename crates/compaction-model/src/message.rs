//! The message and its content parts.

use serde_json::{Map, Value};

use crate::arguments::Arguments;
use crate::object::SharedObject;
use crate::text::Text;

/// A JSON object, as messages keep their metadata and tool-call arguments.
pub type JsonObject = Map<String, Value>;

/// Who a message is from.
///
/// Deliberately exhaustive: the four roles are Haystack's `ChatRole`, the closed set every
/// format this workspace reads is mapped onto, and code that handles a message must handle
/// each of them (a wildcard arm would hide a role it does not know how to keep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The person (or program) the agent works for.
    User,
    /// The model: text, reasoning and tool calls.
    Assistant,
    /// The output of a tool the assistant called.
    Tool,
}

impl Role {
    /// The role as it is written on the wire: `system`, `user`, `assistant` or `tool`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Reads a role from its wire name.
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "system" => Some(Role::System),
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool" => Some(Role::Tool),
            _ => None,
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Plain text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TextPart {
    /// The text.
    pub text: Text,
    /// Fields the part carried that this crate does not know; written back unchanged.
    pub unknown: SharedObject,
}

/// A call the assistant asks a tool to run.
///
/// Its arguments are kept as their compact JSON text (see [`Arguments`]), and a clone shares them,
/// so the copy a result keeps as its `origin` costs the call's name and id, not its arguments again.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCall {
    /// Name of the tool to run.
    pub tool_name: String,
    /// The arguments, a JSON object (held as its text: see [`Arguments`]).
    pub arguments: Arguments,
    /// The arguments exactly as the provider sent them, when they are not a JSON object (models
    /// do send truncated or malformed JSON); `arguments` is then empty. Kept so that counts
    /// measure what the provider received and writers can give it back.
    pub raw_arguments: Option<String>,
    /// The provider's id for the call, which its result refers back to.
    pub id: Option<String>,
    /// Provider-specific information.
    pub extra: Option<SharedObject>,
    /// Fields the part carried that this crate does not know; written back unchanged.
    pub unknown: SharedObject,
}

/// What a tool returned: one string, or a list of text, image and file parts.
///
/// Deliberately exhaustive: a result is either one string or a list (Haystack's
/// `str | list[...]`); what the list may hold grows in [`ResultPart`], which is not exhaustive.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResultContent {
    /// A plain string result.
    Text(Text),
    /// A result made of several parts.
    Parts(Vec<ResultPart>),
}

/// One part of a multi-part tool result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ResultPart {
    /// Text.
    Text(TextPart),
    /// An image.
    Image(ImagePart),
    /// A file.
    File(FilePart),
}

/// The result of running a tool, paired with the call that produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallResult {
    /// What the tool returned.
    pub result: ToolResultContent,
    /// The call this result answers (boxed: a part is as large as its largest kind).
    pub origin: Box<ToolCall>,
    /// Whether the tool failed.
    pub error: bool,
    /// Fields the part carried that this crate does not know; written back unchanged.
    pub unknown: SharedObject,
}

/// The model's reasoning (thinking) text. Counters leave it out: providers drop it between turns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReasoningPart {
    /// The reasoning text.
    pub reasoning_text: String,
    /// Provider-specific information, such as a signature.
    pub extra: SharedObject,
    /// Fields the part carried that this crate does not know; written back unchanged.
    pub unknown: SharedObject,
}

/// An image, carried inline as base64.
#[derive(Debug, Clone, PartialEq)]
pub struct ImagePart {
    /// The image bytes, base64-encoded.
    pub base64_image: String,
    /// The MIME type, such as `image/png`.
    pub mime_type: Option<String>,
    /// Detail level for providers that take one (`auto`, `high`, `low`).
    pub detail: Option<String>,
    /// Metadata of the image.
    pub meta: SharedObject,
    /// Whether the image was validated when it was read (base64 decoded, MIME type checked).
    pub validation: bool,
    /// Fields the part carried that this crate does not know; written back unchanged.
    pub unknown: SharedObject,
}

/// A file, carried inline as base64.
#[derive(Debug, Clone, PartialEq)]
pub struct FilePart {
    /// The file bytes, base64-encoded.
    pub base64_data: String,
    /// The MIME type, such as `application/pdf`.
    pub mime_type: Option<String>,
    /// The file's name, if it has one.
    pub filename: Option<String>,
    /// Provider-specific information.
    pub extra: SharedObject,
    /// Whether the file was validated when it was read (base64 decoded).
    pub validation: bool,
    /// Fields the part carried that this crate does not know; written back unchanged.
    pub unknown: SharedObject,
}

/// One piece of a message's content.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Part {
    /// Text.
    Text(TextPart),
    /// A tool call (assistant messages).
    ToolCall(ToolCall),
    /// A tool's result (tool messages).
    ToolCallResult(ToolCallResult),
    /// Reasoning text (assistant messages).
    Reasoning(ReasoningPart),
    /// An image.
    Image(ImagePart),
    /// A file.
    File(FilePart),
}

impl Part {
    /// The part's kind as Haystack names its content class, less the suffix: `text`,
    /// `tool_call`, `tool_call_result`, `reasoning`, `image` or `file`. Code that meets a kind
    /// it does not handle can name it in its error.
    pub fn kind(&self) -> &'static str {
        match self {
            Part::Text(_) => "text",
            Part::ToolCall(_) => "tool_call",
            Part::ToolCallResult(_) => "tool_call_result",
            Part::Reasoning(_) => "reasoning",
            Part::Image(_) => "image",
            Part::File(_) => "file",
        }
    }
}

impl ResultPart {
    /// The part's kind, as [`Part::kind`] names it: `text`, `image` or `file`.
    pub fn kind(&self) -> &'static str {
        match self {
            ResultPart::Text(_) => "text",
            ResultPart::Image(_) => "image",
            ResultPart::File(_) => "file",
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who the message is from.
    pub role: Role,
    /// The content, in order.
    pub parts: Vec<Part>,
    /// An optional participant name.
    pub name: Option<String>,
    /// Metadata: a JSON object. Compaction and offloading leave their markers here.
    pub meta: SharedObject,
}

impl TextPart {
    /// A text part with no unknown fields.
    pub fn new(text: impl Into<Text>) -> Self {
        TextPart { text: text.into(), unknown: SharedObject::new() }
    }
}

impl ToolCall {
    /// A call to `tool_name` with `arguments`, without an id.
    pub fn new(tool_name: impl Into<String>, arguments: JsonObject) -> Self {
        ToolCall::with_arguments(tool_name, arguments.into())
    }

    /// A call to `tool_name` with `arguments` already held as text (see [`Arguments`]), without
    /// an id.
    pub fn with_arguments(tool_name: impl Into<String>, arguments: Arguments) -> Self {
        ToolCall { tool_name: tool_name.into(), arguments, ..ToolCall::default() }
    }

    /// A call whose arguments arrived as `raw` text that is not a JSON object.
    pub fn with_raw_arguments(tool_name: impl Into<String>, raw: impl Into<String>) -> Self {
        ToolCall { tool_name: tool_name.into(), raw_arguments: Some(raw.into()), ..ToolCall::default() }
    }

    /// Whether the call carries no arguments at all: an empty object and no raw text.
    pub fn has_no_arguments(&self) -> bool {
        self.arguments.is_empty() && self.raw_arguments.is_none()
    }

    /// The same call with an id.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

impl ToolCallResult {
    /// A result for `origin` (a call, or one already boxed).
    pub fn new(result: ToolResultContent, origin: impl Into<Box<ToolCall>>, error: bool) -> Self {
        ToolCallResult { result, origin: origin.into(), error, unknown: SharedObject::new() }
    }
}

impl ImagePart {
    /// An image from base64 data, unvalidated.
    pub fn new(base64_image: impl Into<String>, mime_type: Option<String>) -> Self {
        ImagePart {
            base64_image: base64_image.into(),
            mime_type,
            detail: None,
            meta: SharedObject::new(),
            validation: false,
            unknown: SharedObject::new(),
        }
    }
}

impl FilePart {
    /// A file from base64 data, unvalidated.
    pub fn new(base64_data: impl Into<String>, mime_type: Option<String>, filename: Option<String>) -> Self {
        FilePart {
            base64_data: base64_data.into(),
            mime_type,
            filename,
            extra: SharedObject::new(),
            validation: false,
            unknown: SharedObject::new(),
        }
    }
}

impl From<String> for ToolResultContent {
    fn from(text: String) -> Self {
        ToolResultContent::Text(text.into())
    }
}

impl From<&str> for ToolResultContent {
    fn from(text: &str) -> Self {
        ToolResultContent::Text(text.into())
    }
}

impl From<Text> for ToolResultContent {
    fn from(text: Text) -> Self {
        ToolResultContent::Text(text)
    }
}

impl ToolResultContent {
    /// Whether the result holds no content: an empty list, or nothing but empty text.
    pub fn is_empty(&self) -> bool {
        match self {
            ToolResultContent::Text(text) => text.is_empty(),
            ToolResultContent::Parts(parts) => {
                parts.iter().all(|part| matches!(part, ResultPart::Text(t) if t.text.is_empty()))
            }
        }
    }
}

impl Message {
    fn with_parts(role: Role, parts: Vec<Part>) -> Self {
        Message { role, parts, name: None, meta: SharedObject::new() }
    }

    /// A system message with one text.
    pub fn system(text: impl Into<Text>) -> Self {
        Self::with_parts(Role::System, vec![Part::Text(TextPart::new(text))])
    }

    /// A user message with one text.
    pub fn user(text: impl Into<Text>) -> Self {
        Self::with_parts(Role::User, vec![Part::Text(TextPart::new(text))])
    }

    /// A user message made of text, image and file parts.
    pub fn user_parts(parts: Vec<Part>) -> Self {
        Self::with_parts(Role::User, parts)
    }

    /// An assistant message with one text.
    pub fn assistant(text: impl Into<Text>) -> Self {
        Self::with_parts(Role::Assistant, vec![Part::Text(TextPart::new(text))])
    }

    /// An assistant message with optional text followed by tool calls.
    pub fn assistant_with_calls(text: Option<String>, calls: Vec<ToolCall>) -> Self {
        let mut parts = Vec::with_capacity(calls.len() + 1);
        if let Some(text) = text {
            parts.push(Part::Text(TextPart::new(text)));
        }
        parts.extend(calls.into_iter().map(Part::ToolCall));
        Self::with_parts(Role::Assistant, parts)
    }

    /// A tool message holding one result for `origin`.
    pub fn tool(result: impl Into<ToolResultContent>, origin: impl Into<Box<ToolCall>>, error: bool) -> Self {
        Self::with_parts(
            Role::Tool,
            vec![Part::ToolCallResult(ToolCallResult::new(result.into(), origin, error))],
        )
    }

    /// The same message with metadata `meta`.
    #[must_use]
    pub fn with_meta(mut self, meta: JsonObject) -> Self {
        self.meta = meta.into();
        self
    }

    /// The same message with a participant name.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Whether the message is from `role`.
    pub fn is_from(&self, role: Role) -> bool {
        self.role == role
    }

    /// Every text of the message, in order.
    pub fn texts(&self) -> impl Iterator<Item = &str> + '_ {
        self.parts.iter().filter_map(|part| match part {
            Part::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
    }

    /// The first text, if any.
    pub fn text(&self) -> Option<&str> {
        self.texts().next()
    }

    /// Every tool call of the message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> + '_ {
        self.parts.iter().filter_map(|part| match part {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// Every tool-call result of the message, in order.
    pub fn tool_call_results(&self) -> impl Iterator<Item = &ToolCallResult> + '_ {
        self.parts.iter().filter_map(|part| match part {
            Part::ToolCallResult(r) => Some(r),
            _ => None,
        })
    }

    /// The first tool-call result, if any. A message with one is a *tool-result message*.
    pub fn tool_call_result(&self) -> Option<&ToolCallResult> {
        self.tool_call_results().next()
    }

    /// Whether the message carries at least one tool-call result.
    pub fn has_tool_call_result(&self) -> bool {
        self.parts.iter().any(|part| matches!(part, Part::ToolCallResult(_)))
    }

    /// Every image part of the message (not those inside tool results), in order.
    pub fn images(&self) -> impl Iterator<Item = &ImagePart> + '_ {
        self.parts.iter().filter_map(|part| match part {
            Part::Image(i) => Some(i),
            _ => None,
        })
    }

    /// Every file part of the message (not those inside tool results), in order.
    pub fn files(&self) -> impl Iterator<Item = &FilePart> + '_ {
        self.parts.iter().filter_map(|part| match part {
            Part::File(f) => Some(f),
            _ => None,
        })
    }

    /// Every reasoning part of the message, in order.
    pub fn reasonings(&self) -> impl Iterator<Item = &ReasoningPart> + '_ {
        self.parts.iter().filter_map(|part| match part {
            Part::Reasoning(r) => Some(r),
            _ => None,
        })
    }
}

impl ImagePart {
    /// The image's bytes, decoded from base64 as strictly as Python's `b64decode(validate=True)`.
    ///
    /// # Errors
    ///
    /// When `base64_image` is not strict base64; the error says how, as Python would.
    pub fn decoded(&self) -> Result<Vec<u8>, crate::Base64Error> {
        crate::sniff::decode_base64_strict(&self.base64_image)
    }
}

impl FilePart {
    /// The file's bytes, decoded from base64 as strictly as Python's `b64decode(validate=True)`.
    ///
    /// # Errors
    ///
    /// When `base64_data` is not strict base64; the error says how, as Python would.
    pub fn decoded(&self) -> Result<Vec<u8>, crate::Base64Error> {
        crate::sniff::decode_base64_strict(&self.base64_data)
    }
}
