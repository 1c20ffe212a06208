//! Reading conversations: from a path or standard input, as a JSON array or JSON Lines.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use compaction_model::{Message, ToolSpec};
use serde_json::Value;

/// Where a conversation comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Standard input (INPUT absent or `-`).
    Stdin,
    /// A file.
    File(PathBuf),
}

impl Source {
    /// The source for an INPUT argument.
    pub fn from_arg(arg: Option<&Path>) -> Source {
        match arg {
            None => Source::Stdin,
            Some(path) if path.as_os_str() == "-" => Source::Stdin,
            Some(path) => Source::File(path.to_owned()),
        }
    }

    /// The name used in error messages.
    pub fn name(&self) -> String {
        match self {
            Source::Stdin => "<stdin>".to_owned(),
            Source::File(path) => path.display().to_string(),
        }
    }

    /// Every byte of the input.
    pub fn read_bytes(&self) -> Result<Vec<u8>> {
        match self {
            Source::Stdin => {
                let mut bytes = Vec::new();
                std::io::stdin().read_to_end(&mut bytes).context("<stdin>: cannot read")?;
                Ok(bytes)
            }
            Source::File(path) => {
                std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))
            }
        }
    }
}

/// How the messages were laid out in the input, so output can follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One JSON array.
    Array,
    /// One JSON value per line.
    Lines,
}

/// A conversation read from an input.
#[derive(Debug)]
pub struct Conversation {
    /// The messages.
    pub messages: Vec<Message>,
    /// How they were laid out.
    pub layout: Layout,
}

/// Reads a Haystack conversation: a JSON array of messages, or JSON Lines with one message a line.
pub fn read_conversation(source: &Source) -> Result<Conversation> {
    let bytes = source.read_bytes()?;
    parse_conversation(&bytes, &source.name())
}

/// Parses a Haystack conversation from bytes; `name` names the source in errors.
pub fn parse_conversation(bytes: &[u8], name: &str) -> Result<Conversation> {
    let values = parse_json_values(bytes, name)?;
    let (layout, values) = values;
    let mut messages = Vec::with_capacity(values.len());
    for (index, value) in values.into_iter().enumerate() {
        let message = Message::from_value(value, index).map_err(|error| match layout {
            Layout::Lines => anyhow!("{name}: line {}: {error}", index + 1),
            Layout::Array => anyhow!("{name}: {error}"),
        })?;
        messages.push(message);
    }
    Ok(Conversation { messages, layout })
}

/// Splits input into JSON values: the elements of one array, or one value per non-blank line.
pub fn parse_json_values(bytes: &[u8], name: &str) -> Result<(Layout, Vec<Value>)> {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace());
    let Some(start) = start else {
        return Err(anyhow!("{name}: the input is empty; expected a JSON array of messages or JSON Lines"));
    };
    if bytes[start] == b'[' {
        let value: Value = serde_json::from_slice(bytes).map_err(|error| json_error(name, &error))?;
        match value {
            Value::Array(items) => Ok((Layout::Array, items)),
            _ => unreachable_array(name),
        }
    } else {
        let mut values = Vec::new();
        for (number, line) in bytes.split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: Value = serde_json::from_slice(line)
                .map_err(|error| anyhow!("{name}: line {}: invalid JSON: {error}", number + 1))?;
            values.push(value);
        }
        Ok((Layout::Lines, values))
    }
}

fn unreachable_array(name: &str) -> Result<(Layout, Vec<Value>)> {
    Err(anyhow!("{name}: expected a JSON array of messages"))
}

/// A JSON syntax error with its line and column.
pub fn json_error(name: &str, error: &serde_json::Error) -> anyhow::Error {
    anyhow!("{name}: invalid JSON: {error}")
}

/// Reads a `--tools` file: a JSON array of `{"name", "description", "parameters"}` objects.
pub fn read_tools(path: &Path) -> Result<Vec<ToolSpec>> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).with_context(|| format!("{name}: cannot read"))?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|error| json_error(&name, &error))?;
    let Value::Array(items) = value else {
        return Err(anyhow!("{name}: expected a JSON array of tool specs"));
    };
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            serde_json::from_value::<ToolSpec>(item).map_err(|error| anyhow!("{name}: tool {index}: {error}"))
        })
        .collect()
}
