//! The text a counter measures: Haystack's rendering of a conversation, character for character.
//!
//! Every message becomes one or more lines:
//!
//! - a tool-result message: one line per result, `[tool:NAME] RESULT` or
//!   `[tool:NAME (error)] RESULT`, with `<image>` and `<file: NAME>` standing in for non-text
//!   parts of the result;
//! - any other message: `[ROLE] TEXT` (all its texts joined by newlines), one
//!   `[ROLE -> tool_call] NAME(ARGS)` line per tool call with the arguments printed as Python's
//!   `json.dumps(args, sort_keys=True)` prints them, one `[ROLE] <image>` or
//!   `[ROLE] <file: NAME>` line per image and file, or `[ROLE] <no content>` when there is none
//!   of these. Reasoning is left out: providers drop it between turns.
//!
//! Messages are joined by a newline and the tool schemas, printed as one JSON array, follow the
//! last message directly. Images and files also carry a flat token charge, counted by
//! [`NonText`].
//!
//! [`render_message_with`] renders the same lines under [`RenderOptions`]: with tool-call ids
//! (`[assistant -> tool_call id=ID]`, `[tool:NAME id=ID (error)]`) and with a placeholder of the
//! caller's for images and files. The reference renders a conversation this way for a
//! summarizing model to read; counters never do.

use std::fmt;

use compaction_model::{
    FilePart, ImagePart, Message, Part, ResultPart, ToolCallResult, ToolResultContent, ToolSpec,
};

use compaction_json::python::{float_repr, PythonJson};

/// How the reference prints tool arguments and specs to measure them:
/// `json.dumps(value, sort_keys=True, default=str)`.
const PYTHON: PythonJson = PythonJson::new().sort_keys(true);

/// Content without a text form that a rendering shows as a placeholder: an image or a file,
/// of a message or inside a tool result.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Attachment<'a> {
    /// An image.
    Image(&'a ImagePart),
    /// A file.
    File(&'a FilePart),
}

/// The placeholder counters measure: `<image>` for an image, `<file: NAME>` for a file
/// (`<file: unnamed>` when it has no name or an empty one).
///
/// It is short and says nothing of the content on purpose: its own length is what gets counted.
pub fn short_placeholder(attachment: Attachment<'_>) -> String {
    match attachment {
        Attachment::Image(_) => "<image>".to_owned(),
        Attachment::File(file) => file_placeholder(file.filename.as_deref()),
    }
}

/// A placeholder that says what an attachment was, for a model to read and keep:
/// `<image: MIME, key=value, ...>` from an image's meta, `<file: NAME, MIME, key=value, ...>`
/// from a file's extra (`unknown type` for a missing or empty MIME type, `unnamed` for a missing
/// or empty name). Only top-level strings, numbers and booleans are shown, sorted by key, each
/// value as Python's `str()` prints it (`True`, `1e+16`).
///
/// The placeholder Haystack 3.4.1's summarization compactor renders
/// (`haystack/hooks/compaction/summarization.py`, `_attachment_placeholder`).
pub fn describing_placeholder(attachment: Attachment<'_>) -> String {
    let (kind, mut details, metadata) = match attachment {
        Attachment::Image(image) => ("image", vec![or_unknown(image.mime_type.as_deref())], &image.meta),
        Attachment::File(file) => {
            let name = file.filename.as_deref().filter(|n| !n.is_empty()).unwrap_or("unnamed").to_owned();
            ("file", vec![name, or_unknown(file.mime_type.as_deref())], &file.extra)
        }
    };
    let mut entries: Vec<(&String, &serde_json::Value)> = metadata.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    details
        .extend(entries.into_iter().filter_map(|(key, value)| Some(format!("{key}={}", python_str(value)?))));
    format!("<{kind}: {}>", details.join(", "))
}

fn or_unknown(mime_type: Option<&str>) -> String {
    mime_type.filter(|m| !m.is_empty()).unwrap_or("unknown type").to_owned()
}

/// Python's `str()` of a JSON string, number or boolean as `json.loads` reads it; `None` for
/// anything else.
fn python_str(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_owned()),
        Value::Number(n) => {
            let text = n.to_string();
            if text.contains(['.', 'e', 'E']) {
                let mut out = String::new();
                // Out of range reads as infinity, as Python's `float()` does.
                float_repr(text.parse().unwrap_or(f64::NAN), &mut out);
                Some(out)
            } else if text == "-0" {
                Some("0".to_owned())
            } else {
                Some(text)
            }
        }
        _ => None,
    }
}

/// How [`render_message_with`] renders a message.
///
/// [`RenderOptions::new`] is the rendering counters measure (and [`render_message`] uses). A
/// caller that renders for a model to read, as the summarization compactor does, can show
/// tool-call ids, so the model can pair each result with its call, and pass a placeholder that
/// describes an attachment instead of merely marking it.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct RenderOptions<'a> {
    /// Whether tool calls and results show their call's id (` id=ID`, left out when the id is
    /// missing or empty).
    pub include_tool_call_ids: bool,
    /// The stand-in for an image or a file.
    pub placeholder: &'a (dyn Fn(Attachment<'_>) -> String + Sync),
}

impl fmt::Debug for RenderOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RenderOptions")
            .field("include_tool_call_ids", &self.include_tool_call_ids)
            .finish_non_exhaustive()
    }
}

impl Default for RenderOptions<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> RenderOptions<'a> {
    /// The counters' rendering: no ids, [`short_placeholder`].
    pub fn new() -> Self {
        RenderOptions { include_tool_call_ids: false, placeholder: &short_placeholder }
    }

    /// The same options, showing tool-call ids or not.
    #[must_use]
    pub fn with_tool_call_ids(mut self, include: bool) -> Self {
        self.include_tool_call_ids = include;
        self
    }

    /// The same options with another placeholder for images and files.
    #[must_use]
    pub fn with_placeholder(mut self, placeholder: &'a (dyn Fn(Attachment<'_>) -> String + Sync)) -> Self {
        self.placeholder = placeholder;
        self
    }
}

/// Appends the rendering of one message to `out`, as counters measure it.
pub fn render_message(message: &Message, out: &mut String) {
    render_message_with(message, &RenderOptions::new(), out);
}

/// Appends the rendering of one message to `out` under `options`.
pub fn render_message_with(message: &Message, options: &RenderOptions<'_>, out: &mut String) {
    if message.has_tool_call_result() {
        for (i, result) in message.tool_call_results().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            render_result(result, options, out);
        }
        return;
    }
    let role = message.role.as_str();
    let mut lines = 0usize;
    let mut texts = message.texts().peekable();
    if texts.peek().is_some() {
        out.push('[');
        out.push_str(role);
        out.push_str("] ");
        for (i, text) in texts.enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(text);
        }
        lines += 1;
    }
    for call in message.tool_calls() {
        if lines > 0 {
            out.push('\n');
        }
        out.push('[');
        out.push_str(role);
        out.push_str(" -> tool_call");
        push_id(call.id.as_deref(), options, out);
        out.push_str("] ");
        out.push_str(&call.tool_name);
        out.push('(');
        match &call.raw_arguments {
            // As the reference renders a string `arguments`: `json.dumps` of the string.
            Some(raw) => PYTHON.write_str(raw, out),
            None => PYTHON.write_object(&call.arguments.to_map(), out),
        }
        out.push(')');
        lines += 1;
    }
    // A message's own images come first, then its files, whatever their order among the parts.
    let images = message.images().map(Attachment::Image);
    let files = message.files().map(Attachment::File);
    for attachment in images.chain(files) {
        if lines > 0 {
            out.push('\n');
        }
        out.push('[');
        out.push_str(role);
        out.push_str("] ");
        out.push_str(&(options.placeholder)(attachment));
        lines += 1;
    }
    if lines == 0 {
        out.push('[');
        out.push_str(role);
        out.push_str("] <no content>");
    }
}

/// ` id=ID` when ids are shown and the call has a non-empty one.
fn push_id(id: Option<&str>, options: &RenderOptions<'_>, out: &mut String) {
    if let Some(id) = id.filter(|id| options.include_tool_call_ids && !id.is_empty()) {
        out.push_str(" id=");
        out.push_str(id);
    }
}

/// A result part of a kind this rendering does not know yet, shown as its Haystack JSON so that
/// it is counted rather than left out.
fn unknown_result_part(part: &ResultPart) -> String {
    serde_json::to_string(part).unwrap_or_else(|_| format!("<{}>", part.kind()))
}

fn file_placeholder(filename: Option<&str>) -> String {
    match filename {
        Some(name) if !name.is_empty() => format!("<file: {name}>"),
        _ => "<file: unnamed>".to_owned(),
    }
}

fn render_result(result: &ToolCallResult, options: &RenderOptions<'_>, out: &mut String) {
    out.push_str("[tool:");
    out.push_str(&result.origin.tool_name);
    push_id(result.origin.id.as_deref(), options, out);
    if result.error {
        out.push_str(" (error)");
    }
    out.push_str("] ");
    match &result.result {
        ToolResultContent::Text(text) => out.push_str(text),
        ToolResultContent::Parts(parts) => {
            for part in parts {
                match part {
                    ResultPart::Text(t) => out.push_str(&t.text),
                    ResultPart::Image(image) => {
                        out.push_str(&(options.placeholder)(Attachment::Image(image)))
                    }
                    ResultPart::File(file) => out.push_str(&(options.placeholder)(Attachment::File(file))),
                    other => out.push_str(&unknown_result_part(other)),
                }
            }
        }
    }
}

/// The rendering of one message as a new string.
pub fn rendered_message(message: &Message) -> String {
    let mut out = String::new();
    render_message(message, &mut out);
    out
}

/// The whole conversation as counters see it: messages joined by newlines.
pub fn rendered_conversation(messages: &[Message]) -> String {
    rendered_conversation_with(messages, &RenderOptions::new())
}

/// The whole conversation rendered under `options`: messages joined by newlines.
pub fn rendered_conversation_with(messages: &[Message], options: &RenderOptions<'_>) -> String {
    let mut out = String::new();
    for (i, message) in messages.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        render_message_with(message, options, &mut out);
    }
    out
}

/// The tool schemas as counters see them: one JSON array, or nothing when there are no tools.
pub fn rendered_tools(tools: &[ToolSpec]) -> String {
    let mut out = String::new();
    render_tools(tools, &mut out);
    out
}

/// Appends [`rendered_tools`] to `out`.
pub fn render_tools(tools: &[ToolSpec], out: &mut String) {
    if tools.is_empty() {
        return;
    }
    let specs = serde_json::Value::Array(tools.iter().map(ToolSpec::to_value).collect());
    PYTHON.write(&specs, out);
}

/// The full text a counter measures: [`rendered_conversation`] followed by [`rendered_tools`].
pub fn rendered_text(messages: &[Message], tools: &[ToolSpec]) -> String {
    let mut out = rendered_conversation(messages);
    render_tools(tools, &mut out);
    out
}

/// The length in characters (Unicode scalar values, as Python's `len` counts) of one message's
/// rendering, computed without building it.
pub fn rendered_message_chars(message: &Message) -> usize {
    if message.has_tool_call_result() {
        let mut total = 0;
        for (i, result) in message.tool_call_results().enumerate() {
            total += usize::from(i > 0) + result_chars(result);
        }
        return total;
    }
    // `[role] `, `[role -> tool_call] `: the role's length plus the label's fixed characters.
    let role = message.role.as_str().len();
    let mut total = 0usize;
    let mut lines = 0usize;
    let mut text_count = 0usize;
    let mut text_chars = 0usize;
    for part in &message.parts {
        if let Part::Text(t) = part {
            text_count += 1;
            text_chars += t.text.char_len();
        }
    }
    if text_count > 0 {
        total += role + 3 + text_chars + (text_count - 1);
        lines += 1;
    }
    for call in message.tool_calls() {
        let arguments = match &call.raw_arguments {
            Some(raw) => PYTHON.str_len(raw),
            // Read from the arguments' text: parsing them on every count would cost a map each time.
            None => PYTHON
                .text_char_len(call.arguments.as_json())
                .unwrap_or_else(|| PYTHON.object_char_len(&call.arguments.to_map())),
        };
        total += role + 16 + char_len(&call.tool_name) + 2 + arguments;
        lines += 1;
    }
    for part in &message.parts {
        let placeholder = match part {
            Part::Image(_) => "<image>".len(),
            Part::File(f) => file_placeholder_chars(f.filename.as_deref()),
            _ => continue,
        };
        total += role + 3 + placeholder;
        lines += 1;
    }
    if lines == 0 {
        return role + 3 + "<no content>".len();
    }
    total + (lines - 1)
}

fn file_placeholder_chars(filename: Option<&str>) -> usize {
    match filename {
        Some(name) if !name.is_empty() => "<file: >".len() + char_len(name),
        _ => "<file: unnamed>".len(),
    }
}

fn result_chars(result: &ToolCallResult) -> usize {
    let label = "[tool:] ".len() + char_len(&result.origin.tool_name) + if result.error { 8 } else { 0 };
    let body = match &result.result {
        ToolResultContent::Text(text) => text.char_len(),
        ToolResultContent::Parts(parts) => parts
            .iter()
            .map(|part| match part {
                ResultPart::Text(t) => t.text.char_len(),
                ResultPart::Image(_) => "<image>".len(),
                ResultPart::File(f) => file_placeholder_chars(f.filename.as_deref()),
                other => char_len(&unknown_result_part(other)),
            })
            .sum(),
    };
    label + body
}

/// The length in characters of [`rendered_tools`], computed without building it.
pub fn rendered_tools_chars(tools: &[ToolSpec]) -> usize {
    if tools.is_empty() {
        return 0;
    }
    let specs = serde_json::Value::Array(tools.iter().map(ToolSpec::to_value).collect());
    PYTHON.char_len(&specs)
}

/// Characters as Python's `len` counts them: Unicode scalar values.
pub fn char_len(text: &str) -> usize {
    text.chars().count()
}

/// Images and files in a conversation, which counters charge a flat number of tokens each.
///
/// Counts a message's own image and file parts and those inside its tool results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NonText {
    /// Number of images.
    pub images: usize,
    /// Number of files.
    pub files: usize,
}

impl NonText {
    /// The images and files of one message.
    pub fn of_message(message: &Message) -> Self {
        let mut found = NonText::default();
        for part in &message.parts {
            match part {
                Part::Image(_) => found.images += 1,
                Part::File(_) => found.files += 1,
                Part::ToolCallResult(result) => {
                    if let ToolResultContent::Parts(parts) = &result.result {
                        for part in parts {
                            match part {
                                ResultPart::Image(_) => found.images += 1,
                                ResultPart::File(_) => found.files += 1,
                                // Text, and kinds that carry no flat charge.
                                _ => {}
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        found
    }

    /// The images and files of a whole conversation.
    pub fn of_messages(messages: &[Message]) -> Self {
        messages.iter().map(NonText::of_message).fold(NonText::default(), |a, b| a + b)
    }

    /// The flat charge for these images and files.
    pub fn tokens(self, tokens_per_image: usize, tokens_per_file: usize) -> usize {
        self.images * tokens_per_image + self.files * tokens_per_file
    }
}

impl std::ops::Add for NonText {
    type Output = NonText;
    fn add(self, other: NonText) -> NonText {
        NonText { images: self.images + other.images, files: self.files + other.files }
    }
}

#[cfg(test)]
mod tests {
    use compaction_model::{
        FilePart, ImagePart, Message, Part, ResultPart, TextPart, ToolCall, ToolResultContent,
    };

    use super::*;

    #[test]
    fn ids_and_placeholders_are_options_of_the_same_lines() {
        let call = ToolCall::new("search", serde_json::Map::new()).with_id("c1");
        let unnamed = ToolCall::new("search", serde_json::Map::new()).with_id("");
        let assistant =
            Message::assistant_with_calls(Some("look".into()), vec![call.clone(), unnamed.clone()]);
        let result = Message::tool(
            ToolResultContent::Parts(vec![
                ResultPart::Text(TextPart::new("got ")),
                ResultPart::Image(ImagePart::new("AAAA", Some("image/png".into()))),
            ]),
            call,
            true,
        );
        let user = Message::user_parts(vec![Part::File(FilePart::new("AAAA", None, Some("a.pdf".into())))]);
        let conversation = [assistant, result, user, Message::tool("ok", unnamed, false)];

        assert_eq!(
            rendered_conversation(&conversation),
            "[assistant] look\n[assistant -> tool_call] search({})\n[assistant -> tool_call] search({})\n\
             [tool:search (error)] got <image>\n[user] <file: a.pdf>\n[tool:search] ok"
        );
        let describe = |attachment: Attachment<'_>| match attachment {
            Attachment::Image(image) => format!("<image {}>", image.mime_type.as_deref().unwrap_or("?")),
            Attachment::File(file) => format!("<file {}>", file.filename.as_deref().unwrap_or("?")),
        };
        let options = RenderOptions::new().with_tool_call_ids(true).with_placeholder(&describe);
        assert_eq!(
            rendered_conversation_with(&conversation, &options),
            "[assistant] look\n[assistant -> tool_call id=c1] search({})\n[assistant -> tool_call] search({})\n\
             [tool:search id=c1 (error)] got <image image/png>\n[user] <file a.pdf>\n[tool:search] ok"
        );
        // The default options are the counters' rendering.
        assert_eq!(
            rendered_conversation_with(&conversation, &RenderOptions::default()),
            rendered_conversation(&conversation)
        );
    }
}
