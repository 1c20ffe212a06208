//! The one interface every format's module implements: how it reads the messages of a file's
//! JSON tree, how it encodes messages afresh to write them back over their originals or to
//! convert to it, and what a log's tool result reads as. The read pipeline and the writers ask
//! a format through it (the table is `formats::of`), so none of them imports a format's module
//! to choose what to call, and the tree writer, which a format's own write-back uses, imports
//! none at all.

use std::io::Write;

use compaction_model::{Message, ToolResultContent};
use serde_json::{Map, Value};

use crate::conversation::{Decoded, Layout};
use crate::document::Locator;
use crate::error::Error;
use crate::eventlog::{Event, LogDecoded};
use crate::overlay::Shape;

/// What a format's reader of a JSON tree is given besides the messages taken out of it.
pub(crate) struct TreeRead<'a> {
    /// The input's name in errors.
    pub name: &'a str,
    pub locator: &'a Locator,
    /// Anthropic's `system`, when the file has one.
    pub system: Option<&'a Value>,
    /// Read everything, not only what the model saw at its last call.
    pub full_history: bool,
    /// OpenHands' `instruction`, when the file has one.
    pub instruction: Option<&'a str>,
}

/// A format: reading, encoding, and what its logs' tool results read as.
pub(crate) trait Codec: Sync {
    /// Reads the messages taken out of a file's JSON tree (the file, or its conversation).
    fn read_tree(&self, values: &[Value], tree: &TreeRead<'_>) -> Result<Decoded, Error>;

    /// The tool result a log's value at a result slot reads as, to tell whether a command
    /// changed it; `None` when it does not read as one.
    fn result_content(&self, _value: &Value) -> Option<ToolResultContent> {
        None
    }

    /// Whether one line of a JSON Lines file is a record of this format's logs (detection asks
    /// the formats of logs in turn); false for a format that is not a log.
    fn is_log_record(&self, _line: &Map<String, Value>) -> bool {
        false
    }

    /// A reader of the format's logs a line at a time, for a format written as JSON Lines of
    /// events (Claude Code, Codex, Responses items); `None` for the others.
    fn line_reader(&self, _name: &str, _full_history: bool) -> Option<Box<dyn LineRead>> {
        None
    }

    /// What a read that found no message saw, for its error.
    fn why_empty(&self, _source: &[u8]) -> String {
        String::new()
    }
}

/// A format that can be written: a target of `convert` and of a write-back over a JSON tree
/// (Haystack, OpenAI, Anthropic). Only these encode messages, and the writers ask only these,
/// so no format is ever asked for what it cannot do.
pub(crate) trait TargetCodec: Codec {
    /// Messages encoded afresh, to be written in place of source message `unit` (whose
    /// original is in `originals`) or, with no unit, put in: the values, and the shape they
    /// are laid over an original with.
    fn encode(
        &self,
        messages: &[&Message],
        unit: Option<usize>,
        originals: &[Value],
    ) -> (Vec<Value>, &'static Shape);

    /// The `system` prompt for `messages`, in a format that keeps it apart from the messages.
    fn encode_system(&self, _messages: &[&Message]) -> Option<Value> {
        None
    }

    /// Writes `messages` in this format, nothing of a file read kept.
    fn convert(&self, messages: &[Message], layout: Layout, out: &mut dyn Write) -> Result<(), Error>;
}

/// A log's reader, fed its lines in order.
pub(crate) trait LineRead: std::fmt::Debug + Send + Sync {
    /// Reads line `number` (the `base`-th line read), as the pipeline parsed it.
    fn line(&mut self, number: usize, base: u32, event: Event) -> Result<(), Error>;

    /// The messages read, once every line is.
    fn finish(self: Box<Self>) -> Result<LogDecoded, Error>;
}

/// The error of reading a log's JSON tree: a log is JSON Lines.
pub(crate) fn not_a_tree(name: &str, label: &str) -> Error {
    Error::Unrecognized {
        name: name.to_owned(),
        reason: format!("a {label} log is JSON Lines, one record a line"),
    }
}

/// `value` as compact JSON and a newline.
pub(crate) fn write_line(value: &Value, out: &mut dyn Write) -> Result<(), Error> {
    serde_json::to_writer(&mut *out, value)?;
    out.write_all(b"\n")?;
    Ok(())
}
