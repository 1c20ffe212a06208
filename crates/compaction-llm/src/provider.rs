//! The providers this crate talks to, and what differs between them on the wire.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// A provider API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Provider {
    /// OpenAI's API, or any server that speaks it (vLLM, llama.cpp, Ollama, LiteLLM, ...).
    OpenAI,
    /// Anthropic's Messages API.
    Anthropic,
}

impl Provider {
    /// The provider's short name: `openai` or `anthropic`.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAI => "openai",
            Provider::Anthropic => "anthropic",
        }
    }

    /// The environment variable the API key is read from.
    pub fn api_key_variable(self) -> &'static str {
        match self {
            Provider::OpenAI => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// The environment variable a base URL is read from when the settings give none, as the
    /// provider's own SDK reads it.
    pub fn base_url_variable(self) -> &'static str {
        match self {
            Provider::OpenAI => "OPENAI_BASE_URL",
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
        }
    }

    /// The base URL used when neither the settings nor the environment give one, in the form
    /// the provider's SDK takes: OpenAI's includes `/v1`, Anthropic's does not.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::OpenAI => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Provider {
    type Err = Error;

    /// Reads `openai` or `anthropic` (case-insensitive).
    fn from_str(name: &str) -> Result<Self, Error> {
        match name.to_ascii_lowercase().as_str() {
            "openai" => Ok(Provider::OpenAI),
            "anthropic" => Ok(Provider::Anthropic),
            _ => Err(Error::UnknownProvider { name: name.to_owned() }),
        }
    }
}
