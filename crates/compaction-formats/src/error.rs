//! The one error type of this crate, and [`Location`], which says where in a file it happened.

use std::fmt;

use thiserror::Error;

/// Why a transcript could not be read or written.
///
/// Every variant about the input names the file (the name given in
/// [`ReadOptions`](crate::ReadOptions)) and, where it can, the line, conversation and message or
/// event, so that a user can find the bad spot in a file of thousands of lines. Values echoed
/// from the input are cut to a few dozen characters, with their full length.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The input holds nothing but whitespace.
    #[error("{name}: the input is empty; expected a JSON conversation or JSON Lines")]
    Empty {
        /// The input's name.
        name: String,
    },
    /// The input is not valid JSON (on `line` of JSON Lines, when it is that).
    #[error("{}invalid JSON", line_prefix(.name, *.line))]
    Json {
        /// The input's name.
        name: String,
        /// The line of a JSON Lines file that is not valid JSON.
        line: Option<usize>,
        /// What the parser said, with its line and column.
        #[source]
        source: serde_json::Error,
    },
    /// The input is JSON, but not in a format this crate knows, or not in the one asked for.
    #[error("{name}: {reason}")]
    Unrecognized {
        /// The input's name.
        name: String,
        /// What was seen, and what would be read.
        reason: String,
    },
    /// A message or event is malformed.
    #[error("{at}: {problem}")]
    Invalid {
        /// Where (boxed: errors stay small on the happy path).
        at: Box<Location>,
        /// What is wrong.
        problem: String,
    },
    /// A Haystack message the model crate could not read; its error names the message.
    #[error("{}", .at.for_model_error())]
    Message {
        /// Where (boxed: errors stay small on the happy path).
        at: Box<Location>,
        /// What is wrong with the message.
        #[source]
        source: compaction_model::Error,
    },
    /// The file holds fewer conversations than the one asked for.
    #[error(
        "{name}: conversation {index} is out of range: the file holds {count} conversation{}",
        if *.count == 1 { "" } else { "s" }
    )]
    NoSuchConversation {
        /// The input's name.
        name: String,
        /// The conversation asked for (0 is the first).
        index: usize,
        /// How many the file holds.
        count: usize,
    },
    /// The conversation read holds no message: an empty file of messages, or a log whose every
    /// line was skipped. Reading it as an empty conversation would report a count of 0 for a
    /// file that holds a real one, so it is an error.
    #[error("{name}: read as {format}, the file holds no message{}", reason_suffix(.reason))]
    NoMessages {
        /// The input's name.
        name: String,
        /// The format it was read in.
        format: crate::format::Format,
        /// What was seen instead, when something was.
        reason: String,
    },
    /// Writing the output failed.
    #[error("cannot write the output")]
    Write {
        /// The writer's error.
        #[source]
        source: std::io::Error,
    },
    /// The messages to write back cannot be matched to those read (a command dropped, added or
    /// reordered messages in a way the original file cannot follow).
    #[error("cannot write the conversation back in its own format: {reason}")]
    WriteBack {
        /// Why.
        reason: String,
    },
    /// The messages cannot be written as `target` in a form its readers accept (a tool result
    /// before its call); nothing was written.
    #[error("{target} cannot hold the conversation: {problem}")]
    Unwritable {
        /// The format asked for.
        target: crate::format::Target,
        /// What stands in the way, naming the messages.
        problem: String,
    },
}

fn line_prefix(name: &str, line: Option<usize>) -> String {
    match line {
        Some(line) => format!("{name}: line {line}: "),
        None => format!("{name}: "),
    }
}

fn reason_suffix(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Self {
        Error::Write { source }
    }
}

impl From<serde_json::Error> for Error {
    /// Only for errors of writing JSON out: reading errors carry their place.
    fn from(source: serde_json::Error) -> Self {
        Error::Write { source: source.into() }
    }
}

impl Error {
    /// The location the error names, for errors about one message or event.
    pub fn location(&self) -> Option<&Location> {
        match self {
            Error::Invalid { at, .. } | Error::Message { at, .. } => Some(at),
            _ => None,
        }
    }
}

/// Where in an input something is: the file, and as much of line, conversation and message as
/// is known.
///
/// Shown as `file: line 7`, `file: conversation 3: message 12` or `file: line 2: history: event 5`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    name: String,
    line: Option<usize>,
    conversation: Option<usize>,
    key: Option<String>,
    item: Option<(&'static str, usize)>,
}

impl Location {
    pub(crate) fn file(name: &str) -> Self {
        Location { name: name.to_owned(), line: None, conversation: None, key: None, item: None }
    }

    /// The input's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The line of the file (1 is the first), when the input is JSON Lines.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The conversation of a file holding several (0 is the first), when the file holds several.
    pub fn conversation(&self) -> Option<usize> {
        self.conversation
    }

    /// The message's or event's index in its conversation's list (0 is the first).
    pub fn index(&self) -> Option<usize> {
        self.item.map(|(_, index)| index)
    }

    pub(crate) fn with_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }

    pub(crate) fn with_conversation(mut self, conversation: usize) -> Self {
        self.conversation = Some(conversation);
        self
    }

    pub(crate) fn with_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }

    pub(crate) fn with_item(mut self, noun: &'static str, index: usize) -> Self {
        self.item = Some((noun, index));
        self
    }

    /// The prefix for a model error, which names the message itself.
    fn for_model_error(&self) -> String {
        let mut whole = self.clone();
        if self.line.is_none() || self.key.is_some() {
            whole.item = None;
        }
        whole.to_string()
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(conversation) = self.conversation {
            write!(f, ": conversation {conversation}")?;
        }
        if let Some(line) = self.line {
            write!(f, ": line {line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        // On a line of its own, the line says which message it is.
        let own_line = self.line.is_some() && self.key.is_none();
        if let (Some((noun, index)), false) = (self.item, own_line) {
            write!(f, ": {noun} {index}")?;
        }
        Ok(())
    }
}

/// A value from the input, short enough for one line of an error: cut to a few dozen characters,
/// with the full length said when cut, and JSON-quoted when it is a string.
pub(crate) fn snippet(text: &str) -> String {
    const KEEP: usize = 40;
    let count = text.chars().count();
    if count <= KEEP {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(KEEP).collect();
    format!("{head:?}… ({count} characters)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_read_as_paths() {
        let file = Location::file("s.jsonl");
        assert_eq!(file.clone().with_line(7).with_item("event", 3).to_string(), "s.jsonl: line 7");
        assert_eq!(
            file.clone().with_conversation(3).with_item("message", 12).to_string(),
            "s.jsonl: conversation 3: message 12"
        );
        assert_eq!(
            file.with_line(2).with_key("history").with_item("event", 5).to_string(),
            "s.jsonl: line 2: history: event 5"
        );
    }

    #[test]
    fn snippets_are_short() {
        assert_eq!(snippet("tool"), "\"tool\"");
        let long = "x".repeat(300_000);
        let cut = snippet(&long);
        assert!(cut.len() < 80, "{cut}");
        assert!(cut.ends_with("(300000 characters)"), "{cut}");
    }
}
