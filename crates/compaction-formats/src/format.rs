//! The formats this crate reads and writes, by name.

use std::fmt;
use std::str::FromStr;

/// A transcript format that can be read.
///
/// Its [`Display`](fmt::Display) and [`FromStr`] use the names a command line takes
/// (`claude-code`, `openai`); [`Format::label`] is the name for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Haystack `ChatMessage.to_dict` JSON: an array, or JSON Lines.
    Haystack,
    /// OpenAI Chat Completions messages: an array, an object with `messages`, or tau-bench's
    /// array of trajectories.
    OpenAi,
    /// Anthropic Messages: an object with `system` and `messages`, or an array of messages.
    Anthropic,
    /// A Claude Code session log (`.jsonl`, one event a line).
    ClaudeCode,
    /// A SWE-agent trajectory (`.traj`), read from its `history`.
    SweAgent,
    /// OpenHands event logs: an array of events, or one instance a line, each with a `history`
    /// of events.
    OpenHands,
    /// A Codex CLI rollout (`rollout-*.jsonl`, one `{"timestamp", "type", "payload"}` a line).
    Codex,
    /// OpenAI Responses items (what the Responses API takes as `input`): an array, an object
    /// with `input`, or one item a line.
    Responses,
}

/// A format that can be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Target {
    /// Haystack's current `ChatMessage.to_dict` shape.
    Haystack,
    /// OpenAI Chat Completions messages.
    OpenAi,
    /// Anthropic Messages: `{"system": ..., "messages": [...]}`.
    Anthropic,
}

impl Format {
    /// Every format, in the order help texts list them.
    pub const ALL: &'static [Format] = &[
        Format::Haystack,
        Format::OpenAi,
        Format::Anthropic,
        Format::ClaudeCode,
        Format::SweAgent,
        Format::OpenHands,
        Format::Codex,
        Format::Responses,
    ];

    /// The name a command line takes: `haystack`, `openai`, `claude-code`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Haystack => "haystack",
            Format::OpenAi => "openai",
            Format::Anthropic => "anthropic",
            Format::ClaudeCode => "claude-code",
            Format::SweAgent => "swe-agent",
            Format::OpenHands => "openhands",
            Format::Codex => "codex",
            Format::Responses => "responses",
        }
    }

    /// The name for people: `Claude Code`, `OpenAI`.
    pub fn label(self) -> &'static str {
        match self {
            Format::Haystack => "Haystack",
            Format::OpenAi => "OpenAI",
            Format::Anthropic => "Anthropic",
            Format::ClaudeCode => "Claude Code",
            Format::SweAgent => "SWE-agent",
            Format::OpenHands => "OpenHands",
            Format::Codex => "Codex",
            Format::Responses => "OpenAI Responses",
        }
    }

    /// The target closest to this format, for converting: the format itself when it is a
    /// target, else the one its messages are in (Claude Code as Anthropic; SWE-agent, OpenHands,
    /// Codex and Responses as OpenAI).
    pub fn default_target(self) -> Target {
        match self {
            Format::Haystack => Target::Haystack,
            Format::OpenAi | Format::SweAgent | Format::OpenHands | Format::Codex | Format::Responses => {
                Target::OpenAi
            }
            Format::Anthropic | Format::ClaudeCode => Target::Anthropic,
        }
    }

    /// Whether a conversation read in this format is written back in it (only its changed tool
    /// results and inputs edited); the others are written as [`Format::default_target`].
    pub fn writes_back(self) -> bool {
        !matches!(self, Format::SweAgent | Format::OpenHands)
    }

    /// The target that writes this very format back, when there is one.
    pub(crate) fn native_target(self) -> Option<Target> {
        match self {
            Format::Haystack => Some(Target::Haystack),
            Format::OpenAi => Some(Target::OpenAi),
            Format::Anthropic => Some(Target::Anthropic),
            _ => None,
        }
    }
}

impl Target {
    /// Every target, in the order help texts list them.
    pub const ALL: &'static [Target] = &[Target::Haystack, Target::OpenAi, Target::Anthropic];

    /// The name a command line takes: `haystack`, `openai`, `anthropic`.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Haystack => "haystack",
            Target::OpenAi => "openai",
            Target::Anthropic => "anthropic",
        }
    }
}

/// A name that is no format (or target) this crate knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format {name:?}; expected one of {expected}")]
pub struct UnknownFormat {
    name: String,
    expected: String,
}

fn unknown(name: &str, names: impl Iterator<Item = &'static str>) -> UnknownFormat {
    let name: String = name.chars().take(40).collect();
    UnknownFormat { name, expected: names.collect::<Vec<_>>().join(", ") }
}

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| unknown(name, Format::ALL.iter().map(|f| f.as_str())))
    }
}

impl FromStr for Target {
    type Err = UnknownFormat;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Target::ALL
            .iter()
            .copied()
            .find(|t| t.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| unknown(name, Target::ALL.iter().map(|t| t.as_str())))
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for format in Format::ALL {
            assert_eq!(format.to_string().parse::<Format>(), Ok(*format));
        }
        for target in Target::ALL {
            assert_eq!(target.to_string().parse::<Target>(), Ok(*target));
        }
        assert_eq!("Claude-Code".parse::<Format>(), Ok(Format::ClaudeCode));
        let error = "xml".parse::<Format>().unwrap_err().to_string();
        assert!(error.contains("\"xml\"") && error.contains("claude-code"), "{error}");
        assert!("swe-agent".parse::<Target>().is_err());
        assert_eq!("codex".parse::<Format>(), Ok(Format::Codex));
    }
}
