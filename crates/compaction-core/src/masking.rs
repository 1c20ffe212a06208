//! [`ObservationMaskingCompactor`]: all but the newest observations give way to a one-line note,
//! as SWE-agent's `LastNObservations` history processor masks them.

use compaction_model::SharedObject;
use compaction_model::{
    is_compacted, CompactionMarker, Message, Part, ResultPart, Role, TextPart, ToolResultContent,
};
use compaction_tokens::TokenCounter;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::compactor::{count_rewrites, Compaction, CompactionReport, Compactor, ResultReport, Rewrite};
use crate::error::Error;
use crate::settings::{InitParameters, IntegerSetting};
use crate::steps::RewrittenResult;

/// Strategy recorded on a masked observation: `context_compaction: {"strategy":
/// "observation_masking", "original_tokens": N}`.
pub const STRATEGY_OBSERVATION_MASKING: &str = "observation_masking";

// The note and its image suffix are data, kept in sync with SWE-agent/SWE-agent@3ea751c
// `sweagent/agent/history_processors.py`, `LastNObservations.__call__`.
/// The note a masked observation becomes; `{lines}` is its count of text lines.
pub const MASKED_OBSERVATION_NOTE: &str = "Old environment output: ({lines} lines omitted)";
/// Appended to the note of a masked observation that held images; `{images}` is their count.
pub const MASKED_IMAGES_NOTE: &str = " ({images} images omitted)";

/// Meta keys a SWE-agent history entry is read with (compaction-formats keeps them): its
/// `message_type`, whether it is a demonstration, and its tags.
const MESSAGE_TYPE: &str = "message_type";
const IS_DEMO: &str = "is_demo";
const TAGS: &str = "tags";

/// How many observations [`ObservationMaskingCompactor`] keeps, and when it moves on.
///
/// The fields are `LastNObservations`' parameters, with its defaults but for `n`, which SWE-agent
/// requires and this sets to 5, the value of SWE-agent's paper and its 0.7 configuration.
/// Serializes in a plain form; [`MaskingSettings::from_value`] and `Deserialize` read it, and
/// take SWE-agent's `n` for `keep_observations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct MaskingSettings {
    /// How many of the newest observations are kept (SWE-agent's `n`). At least 1.
    pub keep_observations: usize,
    /// How many observations arrive between two moves of the cut (SWE-agent's `polling`): the
    /// newest `keep_observations` to `keep_observations + polling - 1` are kept, so the masked
    /// prefix, and a provider's prompt cache of it, changes only every `polling` observations.
    /// At least 1.
    pub polling: usize,
    /// Observations whose `tags` meta holds one of these are kept however old (SWE-agent's
    /// `always_keep_output_for_tags`).
    pub keep_output_tags: Vec<String>,
    /// Observations whose `tags` meta holds one of these are masked however new (SWE-agent's
    /// `always_remove_output_for_tags`); this wins over `keep_output_tags`.
    pub remove_output_tags: Vec<String>,
}

impl Default for MaskingSettings {
    fn default() -> Self {
        MaskingSettings {
            keep_observations: 5,
            polling: 1,
            keep_output_tags: vec!["keep_output".to_owned()],
            remove_output_tags: vec!["remove_output".to_owned()],
        }
    }
}

impl MaskingSettings {
    /// The default settings keeping the newest `keep_observations` observations.
    pub fn new(keep_observations: usize) -> Self {
        MaskingSettings::default().with_keep_observations(keep_observations)
    }

    /// The same settings keeping the newest `keep_observations` observations.
    #[must_use]
    pub fn with_keep_observations(mut self, keep_observations: usize) -> Self {
        self.keep_observations = keep_observations;
        self
    }

    /// The same settings moving the cut every `polling` observations.
    #[must_use]
    pub fn with_polling(mut self, polling: usize) -> Self {
        self.polling = polling;
        self
    }

    /// The same settings keeping observations tagged with any of `tags`, however old.
    #[must_use]
    pub fn with_keep_output_tags<I, S>(mut self, tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.keep_output_tags = tags.into_iter().map(Into::into).collect();
        self
    }

    /// The same settings masking observations tagged with any of `tags`, however new.
    #[must_use]
    pub fn with_remove_output_tags<I, S>(mut self, tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.remove_output_tags = tags.into_iter().map(Into::into).collect();
        self
    }

    /// Checks the settings as SWE-agent does, and `polling`, which SWE-agent divides by.
    ///
    /// # Errors
    ///
    /// When `keep_observations` or `polling` is 0.
    pub fn validate(&self) -> Result<(), Error> {
        if self.keep_observations < 1 {
            return Err(Error::KeepObservationsTooSmall(self.keep_observations as i128));
        }
        if self.polling < 1 {
            return Err(Error::PollingTooSmall(self.polling as i128));
        }
        Ok(())
    }

    /// Reads settings in the plain form (`n` is taken for `keep_observations`). Missing keys take
    /// their defaults; unknown keys, values of the wrong kind and values below 1 are errors.
    ///
    /// # Errors
    ///
    /// For an unknown key, a value of the wrong kind, or a count below 1.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        const KNOWN: &[&str] =
            &["keep_observations", "n", "polling", "keep_output_tags", "remove_output_tags"];
        let params = InitParameters::read_plain(value, "ObservationMaskingCompactor", KNOWN)?;
        let mut settings = MaskingSettings::default();
        // `n` is SWE-agent's name; given both, `n` wins, as it comes later in key order.
        for key in ["keep_observations", "n"] {
            if let Some(n) = count(&params, key)? {
                settings.keep_observations = n;
            }
        }
        if let Some(polling) = count(&params, "polling")? {
            settings.polling = polling;
        }
        if let Some(tags) = params.strings("keep_output_tags")? {
            settings.keep_output_tags = tags;
        }
        if let Some(tags) = params.strings("remove_output_tags")? {
            settings.remove_output_tags = tags;
        }
        settings.validate()?;
        Ok(settings)
    }
}

fn count(params: &InitParameters<'_>, key: &str) -> Result<Option<usize>, Error> {
    match params.integer(key)? {
        None => Ok(None),
        Some(IntegerSetting::NonNegative(n)) => Ok(Some(n)),
        Some(IntegerSetting::Negative(_)) => {
            Err(Error::InvalidSetting { key: key.to_owned(), reason: "must be at least 1".to_owned() })
        }
    }
}

impl<'de> Deserialize<'de> for MaskingSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        MaskingSettings::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// Masks every observation but the first and the newest few, as SWE-agent's `LastNObservations`
/// does: each masked one keeps its place and becomes `Old environment output: (N lines
/// omitted)`, with ` (M images omitted)` when it held images.
///
/// **Observations.** A conversation read from a SWE-agent 1.x trajectory carries each entry's
/// `message_type` in its meta: the observations are the entries of type `observation`, as
/// SWE-agent says. Without that marker, they are the messages holding a tool result; in a
/// text-action conversation (no tool call anywhere: SWE-agent 0.x, mini-swe-agent), every user
/// message, each carrying an action's output. Either way the first user message, the task
/// (SWE-agent's instance template), counts as the first observation and is never masked, and
/// demonstrations (`is_demo` in meta) are not observations.
///
/// **Which are masked.** With `n` observations to keep and `polling` P, of the O observations
/// the ones from the second up to, not including, the one at position `⌊O / P⌋ · P − n` are
/// masked; so, with P = 1, all but the first and the newest `n`. Tags in meta (`tags`) keep or
/// mask an observation whatever its age, as in SWE-agent.
///
/// **Lines and images.** N counts lines as Python's `str.splitlines` does (`\r\n`, `\r`, `\n`
/// and the other Unicode line boundaries; a trailing newline opens no line), over the message's
/// text parts and the text of its tool results; M counts its images.
///
/// **The target.** SWE-agent's processor has no target: it masks on every model call, whatever
/// the size. This compactor masks exactly what the processor would, whatever `target_tokens`,
/// which only decides the report's `target_reached`; when to mask is the caller's (the
/// compaction hook masks at each call where the context has reached its `compact_at`, SWE-agent
/// at every call). Masking what was masked before gives the same messages, so a conversation
/// compacted in place at every call is at each call what SWE-agent sends then.
///
/// **Beyond SWE-agent.** A message already rewritten by a compactor (`context_compaction` in its
/// meta), such as one masked before, counts as an observation but is left as it is, so a note is
/// never counted as the output. A tool-result message keeps its results, so no call loses its
/// answer: each result's content becomes the note for its own content, and any other part of
/// the message stays (for SWE-agent's messages, one result and nothing else, this is SWE-agent's
/// note). A masked message gets the `context_compaction` marker of strategy
/// [`STRATEGY_OBSERVATION_MASKING`]. The report lists each masked message in `results`, a text
/// observation with an empty tool name and no call id, so that
/// [`CompactionReport::changed_indices`] names every one. As every compactor, it returns `None`
/// when the conversation would not get smaller (only notes longer than what they replace), where
/// SWE-agent would mask anyway; a `remove_output` tag on a message that is no observation, which
/// SWE-agent rejects with an assertion, masks nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservationMaskingCompactor {
    settings: MaskingSettings,
}

impl ObservationMaskingCompactor {
    /// A compactor with `settings`, once they pass [`MaskingSettings::validate`].
    ///
    /// # Errors
    ///
    /// When the settings fail [`MaskingSettings::validate`].
    pub fn new(settings: MaskingSettings) -> Result<Self, Error> {
        settings.validate()?;
        Ok(ObservationMaskingCompactor { settings })
    }

    /// The settings in use.
    pub fn settings(&self) -> &MaskingSettings {
        &self.settings
    }

    /// The indices of the observations of `messages`, oldest first (see the type's docs).
    pub fn observations(messages: &[Message]) -> Vec<usize> {
        let demo = |message: &Message| message.meta.get(IS_DEMO).is_some_and(truthy);
        if messages.iter().any(|m| m.meta.contains_key(MESSAGE_TYPE)) {
            return (0..messages.len())
                .filter(|&k| {
                    let message = &messages[k];
                    message.meta.get(MESSAGE_TYPE).and_then(Value::as_str) == Some("observation")
                        && !demo(message)
                })
                .collect();
        }
        let text_action = !messages
            .iter()
            .flat_map(|m| &m.parts)
            .any(|p| matches!(p, Part::ToolCall(_) | Part::ToolCallResult(_)));
        let mut task_seen = false;
        (0..messages.len())
            .filter(|&k| {
                let message = &messages[k];
                if demo(message) {
                    return false;
                }
                if message.role == Role::User
                    && !message.has_tool_call_result()
                    && (text_action || !task_seen)
                {
                    task_seen = true;
                    return true;
                }
                !text_action && message.has_tool_call_result()
            })
            .collect()
    }

    /// The indices of the messages SWE-agent's processor masks, in increasing order, before any
    /// is left out for carrying a compaction marker.
    pub fn masked_indices(&self, messages: &[Message]) -> Vec<usize> {
        let observations = Self::observations(messages);
        let settings = &self.settings;
        let polling = settings.polling.max(1);
        let cut = ((observations.len() / polling) * polling).saturating_sub(settings.keep_observations);
        let tagged = |message: &Message, tags: &[String]| match message.meta.get(TAGS) {
            Some(Value::Array(items)) => {
                items.iter().filter_map(Value::as_str).any(|t| tags.iter().any(|w| w == t))
            }
            _ => false,
        };
        observations
            .iter()
            .enumerate()
            .filter(|&(position, &index)| {
                let message = &messages[index];
                // The first observation, the instance template, is never in the masked range.
                let old = position >= 1 && position < cut;
                (old && !tagged(message, &settings.keep_output_tags))
                    || tagged(message, &settings.remove_output_tags)
            })
            .map(|(_, &index)| index)
            .collect()
    }
}

/// Python's truth of a JSON value, as `entry.get("is_demo", False)` is tested.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// How many lines Python's `str.splitlines` finds in `text`.
pub(crate) fn python_line_count(text: &str) -> usize {
    let mut lines = 0;
    let mut open = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                chars.next_if_eq(&'\n');
                lines += 1;
                open = false;
            }
            '\n' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => {
                lines += 1;
                open = false;
            }
            _ => open = true,
        }
    }
    lines + usize::from(open)
}

/// The note for content of `lines` text lines and `images` images.
fn note(lines: usize, images: usize) -> String {
    let mut note = MASKED_OBSERVATION_NOTE.replace("{lines}", &lines.to_string());
    if images > 0 {
        note.push_str(&MASKED_IMAGES_NOTE.replace("{images}", &images.to_string()));
    }
    note
}

/// Text lines and images of a tool result's content.
fn result_stats(content: &ToolResultContent) -> (usize, usize) {
    match content {
        ToolResultContent::Text(text) => (python_line_count(text.as_str()), 0),
        ToolResultContent::Parts(parts) => parts.iter().fold((0, 0), |(lines, images), part| match part {
            ResultPart::Text(text) => (lines + python_line_count(text.text.as_str()), images),
            ResultPart::Image(_) => (lines, images + 1),
            _ => (lines, images),
        }),
    }
}

/// The masked form of `message`, and for a tool-result message each result's position with the
/// message as it is once the results up to it are masked.
fn mask(message: &Message, original_tokens: usize) -> (Message, Vec<(usize, Message)>) {
    let mut masked = message.clone();
    let mut steps = Vec::new();
    if message.has_tool_call_result() {
        let mut position = 0;
        for k in 0..masked.parts.len() {
            if let Part::ToolCallResult(result) = &mut masked.parts[k] {
                let (lines, images) = result_stats(&result.result);
                result.result = ToolResultContent::Text(note(lines, images).into());
                result.unknown = SharedObject::new();
                steps.push((position, masked.clone()));
                position += 1;
            }
        }
    } else {
        let (lines, images) = message.parts.iter().fold((0, 0), |(lines, images), part| match part {
            Part::Text(text) => (lines + python_line_count(text.text.as_str()), images),
            Part::Image(_) => (lines, images + 1),
            _ => (lines, images),
        });
        masked.parts = vec![Part::Text(TextPart::new(note(lines, images)))];
    }
    CompactionMarker::new(STRATEGY_OBSERVATION_MASKING, original_tokens as u64).write_to(&mut masked.meta);
    (masked, steps)
}

impl Compactor for ObservationMaskingCompactor {
    fn try_compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Compaction>, Error> {
        let indices: Vec<usize> =
            self.masked_indices(messages).into_iter().filter(|&k| !is_compacted(&messages[k].meta)).collect();
        if indices.is_empty() {
            return Ok(None);
        }
        let own =
            |message: &Message| counter.try_count(std::slice::from_ref(message), &[]).map_err(Error::Count);
        let mut rewrites = Vec::with_capacity(indices.len());
        let mut results = Vec::new();
        for index in indices {
            let original = &messages[index];
            let before = own(original)?;
            let (masked, steps) = mask(original, before);
            let after = own(&masked)?;
            if steps.is_empty() {
                let rewritten = RewrittenResult { position: 0, tokens_before: before, tokens_after: after };
                results.push(ResultReport::for_result(index, original, &rewritten));
            } else {
                // One entry per result, each with the message's counts just before and after it.
                let mut current = before;
                for (position, step) in steps {
                    let step_tokens = own(&step)?;
                    let rewritten =
                        RewrittenResult { position, tokens_before: current, tokens_after: step_tokens };
                    results.push(ResultReport::for_result(index, original, &rewritten));
                    current = step_tokens;
                }
            }
            rewrites.push((index, Rewrite::Message(masked)));
        }
        let tokens_before = counter.try_count(messages, &[]).map_err(Error::Count)?;
        let tokens_after = count_rewrites(messages, &rewrites, counter, &[]).map_err(Error::Count)?;
        if tokens_after >= tokens_before {
            return Ok(None);
        }
        let report = CompactionReport::new(
            STRATEGY_OBSERVATION_MASKING,
            tokens_before,
            tokens_after,
            target_tokens,
            results,
        );
        Ok(Some(Compaction::rewriting(rewrites, report)))
    }

    fn name(&self) -> &str {
        "ObservationMaskingCompactor"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_as_python_splitlines_counts_them() {
        // Each expected count is `len(text.splitlines())` in CPython 3.11.
        let cases: [(&str, usize); 12] = [
            ("", 0),
            ("a", 1),
            ("a\n", 1),
            ("\n", 1),
            ("a\n\nb", 3),
            ("a\r\nb\r\n", 2),
            ("a\rb", 2),
            ("\r\r\n", 2),
            ("a\u{0b}b\u{0c}c\u{1c}d\u{1d}e\u{1e}f", 6),
            ("a\u{85}b\u{2028}c\u{2029}", 3),
            ("a\u{2027}b", 1),
            ("é\n\n", 2),
        ];
        for (text, lines) in cases {
            assert_eq!(python_line_count(text), lines, "{text:?}");
        }
    }

    #[test]
    fn the_note_says_lines_and_images() {
        assert_eq!(note(3, 0), "Old environment output: (3 lines omitted)");
        assert_eq!(note(0, 2), "Old environment output: (0 lines omitted) (2 images omitted)");
    }
}
