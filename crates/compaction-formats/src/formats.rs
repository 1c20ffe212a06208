//! The table of formats: the one place that maps a [`Format`] (or a [`Target`]) to the module
//! that reads and writes it.

use crate::anthropic::Anthropic;
use crate::claude_code::ClaudeCode;
use crate::codec::{Codec, TargetCodec};
use crate::codex::Codex;
use crate::format::{Format, Target};
use crate::haystack::Haystack;
use crate::openai::{OpenAi, SweAgent};
use crate::openhands::OpenHands;
use crate::responses::Responses;

/// The module of `format`.
pub(crate) fn of(format: Format) -> &'static dyn Codec {
    match format {
        Format::Haystack => &Haystack,
        Format::OpenAi => &OpenAi,
        Format::SweAgent => &SweAgent,
        Format::Anthropic => &Anthropic,
        Format::OpenHands => &OpenHands,
        Format::ClaudeCode => &ClaudeCode,
        Format::Codex => &Codex,
        Format::Responses => &Responses,
    }
}

/// The module of `target`.
pub(crate) fn of_target(target: Target) -> &'static dyn TargetCodec {
    match target {
        Target::Haystack => &Haystack,
        Target::OpenAi => &OpenAi,
        Target::Anthropic => &Anthropic,
    }
}
