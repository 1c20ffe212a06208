//! [`SlidingWindowCompactor`]: the oldest history gives way, whole turns and whole steps at a time,
//! and one note says how much went.

use compaction_model::{Message, Role, CONTEXT_COMPACTION, STRATEGY_SLIDING_WINDOW};
use compaction_tokens::TokenCounter;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::compactor::{Compaction, CompactionReport, Compactor, Edits};
use crate::error::Error;
use crate::regions::{
    current_agent_step_groups, historical_turn_groups, is_compaction_message, latest_user_index,
    leading_system_end, Sizer,
};
use crate::settings::{InitParameters, IntegerSetting};

/// The class path Haystack writes as `type` in `SlidingWindowCompactor.to_dict()`.
pub const HAYSTACK_SLIDING_WINDOW_TYPE: &str =
    "haystack.hooks.compaction.sliding_window.SlidingWindowCompactor";

/// What the omission note's text may hold to have the number of removed messages put in.
pub const NUM_REMOVED_PLACEHOLDER: &str = "{num_removed}";

/// The omission note a [`SlidingWindowCompactor`] leaves unless another is set.
///
/// Data, kept in sync with Haystack 3.4.1, `haystack/hooks/compaction/sliding_window.py`
/// (`_DEFAULT_OMISSION_NOTE`), so that the note reads as the reference's does.
pub const DEFAULT_OMISSION_NOTE: &str =
    "[{num_removed} earlier messages were removed from this conversation to free up context and cannot be recovered.]";

/// What a [`SlidingWindowCompactor`] keeps and what it leaves in place of what it removed.
///
/// The defaults are the reference's. Serializes in the plain form (`{"min_keep_steps",
/// "omission_note"}`); [`SlidingWindowSettings::from_value`] and `Deserialize` also read
/// Haystack's `to_dict` form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SlidingWindowSettings {
    /// The fewest of the current task's newest agent steps kept even when they do not fit the
    /// target (default 1). 0 lets every step go when none fits.
    pub min_keep_steps: usize,
    /// The user message left where messages were removed, with [`NUM_REMOVED_PLACEHOLDER`]
    /// replaced by how many (every occurrence, and no other brace is touched). `None`, or an
    /// empty text as in the reference, removes them without a note.
    pub omission_note: Option<String>,
}

impl Default for SlidingWindowSettings {
    fn default() -> Self {
        SlidingWindowSettings { min_keep_steps: 1, omission_note: Some(DEFAULT_OMISSION_NOTE.to_owned()) }
    }
}

impl SlidingWindowSettings {
    /// The same settings keeping at least `min_keep_steps` of the newest steps.
    #[must_use]
    pub fn with_min_keep_steps(mut self, min_keep_steps: usize) -> Self {
        self.min_keep_steps = min_keep_steps;
        self
    }

    /// The same settings with another omission note, or none.
    #[must_use]
    pub fn with_omission_note(mut self, omission_note: Option<String>) -> Self {
        self.omission_note = omission_note;
        self
    }

    /// Reads settings in the plain form or Haystack's `to_dict` form. Missing keys take their
    /// defaults; `omission_note: null` means no note; unknown keys, values of the wrong kind and a
    /// negative `min_keep_steps` are errors.
    ///
    /// # Errors
    ///
    /// For an unknown key, a value of the wrong kind, a negative `min_keep_steps`, or a `type`
    /// other than the sliding window's.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let params =
            InitParameters::read(value, HAYSTACK_SLIDING_WINDOW_TYPE, &["min_keep_steps", "omission_note"])?;
        let mut settings = SlidingWindowSettings::default();
        if let Some(steps) = min_keep_steps(&params)? {
            settings.min_keep_steps = steps;
        }
        match params.get("omission_note") {
            None => {}
            Some(Value::Null) => settings.omission_note = None,
            Some(_) => settings.omission_note = params.string("omission_note")?.map(str::to_owned),
        }
        Ok(settings)
    }

    /// The settings in Haystack's `to_dict` form, which its `from_dict` reads.
    pub fn to_haystack_value(&self) -> Value {
        let mut params = Map::new();
        params.insert("min_keep_steps".into(), Value::from(self.min_keep_steps));
        params.insert("omission_note".into(), self.omission_note.clone().map_or(Value::Null, Value::String));
        let mut dict = Map::new();
        dict.insert("type".into(), Value::String(HAYSTACK_SLIDING_WINDOW_TYPE.into()));
        dict.insert("init_parameters".into(), Value::Object(params));
        Value::Object(dict)
    }
}

impl<'de> Deserialize<'de> for SlidingWindowSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        SlidingWindowSettings::from_value(&value).map_err(serde::de::Error::custom)
    }
}

/// Keeps the agent's instructions, its current task and as much of the most recent conversation
/// as the target allows, and drops the rest — whole turns and whole steps, never half of one.
///
/// It behaves as Haystack's `SlidingWindowCompactor`:
///
/// - The leading system messages and the latest user message (the task) are always kept.
/// - When the current task's steps (an assistant message with the tool results that follow it)
///   fit what the target leaves, all of them stay, and earlier turns (a user message and all
///   that follows it up to the next one) are kept newest first while they fit.
/// - Otherwise every earlier turn goes and the task's oldest steps go too, newest kept first
///   while they fit, but never fewer than `min_keep_steps` of them.
/// - Anything else outside those groups (a message between the system block and the first
///   turn, a message in the task that is not part of a step, an earlier note) goes.
/// - The omission note, a user message, stands where the removed messages were: after the
///   system block when only turns went, after the task when steps went. Its meta is
///   `context_compaction: {"strategy": "sliding_window", "removed_messages": N,
///   "kept_messages": K}`. An earlier note is never kept in its turn, so there is only ever
///   one; when an earlier note is all there is to remove, the compactor declines.
///
/// A tool call and its results are in the same step, so they stay or go together.
///
/// One deviation: where the note would outweigh what was removed, so the conversation would not
/// get smaller, this compactor declines; the reference returns the larger conversation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlidingWindowCompactor {
    settings: SlidingWindowSettings,
}

/// The reference's split of a conversation: what stays, where the note goes, what goes.
struct Split {
    kept: Vec<usize>,
    note_index: usize,
    removed: Vec<usize>,
}

impl SlidingWindowCompactor {
    /// A compactor with `settings` (every value is valid).
    pub fn new(settings: SlidingWindowSettings) -> Self {
        SlidingWindowCompactor { settings }
    }

    /// Reads a compactor from its plain settings or Haystack's `to_dict` form.
    ///
    /// # Errors
    ///
    /// As [`SlidingWindowSettings::from_value`].
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        Ok(Self::new(SlidingWindowSettings::from_value(value)?))
    }

    /// The settings in use.
    pub fn settings(&self) -> &SlidingWindowSettings {
        &self.settings
    }

    fn split(&self, messages: &[Message], target_tokens: usize, sizer: &Sizer<'_>) -> Result<Split, Error> {
        let system_end = leading_system_end(messages);
        let task_index = latest_user_index(messages);
        let task: Vec<usize> = task_index.into_iter().collect();

        // A turn keeps everything but an earlier note: keeping the turn folds that note into
        // the one this run leaves.
        let turns: Vec<Vec<usize>> = historical_turn_groups(messages, system_end, task_index)
            .into_iter()
            .map(|turn| turn.filter(|&i| !is_note(&messages[i])).collect())
            .collect();
        let steps: Vec<Vec<usize>> = current_agent_step_groups(messages, system_end, task_index)
            .into_iter()
            .map(Iterator::collect)
            .collect();

        // The instructions and the task are never removed, so they are paid for first. Python's
        // integers go below zero here, and so does this budget.
        let protected: Vec<usize> = (0..system_end).chain(task.iter().copied()).collect();
        let available = target_tokens as i128 - sizer.count(messages, &protected)? as i128;
        let task_tokens = sizer.count(messages, &steps.concat())? as i128;
        let (first_turn, first_step) = if task_tokens > available {
            // The task alone overruns the budget: every earlier turn goes, and its oldest steps
            // until the rest fits, keeping the newest `min_keep_steps` in any case.
            let first_step = first_group_to_keep(messages, &steps, available, sizer)?;
            (turns.len(), first_step.min(steps.len().saturating_sub(self.settings.min_keep_steps)))
        } else {
            (first_group_to_keep(messages, &turns, available - task_tokens, sizer)?, 0)
        };

        let kept_turns = turns[first_turn..].concat();
        let kept: Vec<usize> = (0..system_end)
            .chain(kept_turns.iter().copied())
            .chain(task.iter().copied())
            .chain(steps[first_step..].iter().flatten().copied())
            .collect();
        let note_index =
            if first_step == 0 { system_end } else { system_end + kept_turns.len() + task.len() };
        let mut is_kept = vec![false; messages.len()];
        kept.iter().for_each(|&i| is_kept[i] = true);
        let removed = (0..messages.len()).filter(|&i| !is_kept[i]).collect();
        Ok(Split { kept, note_index, removed })
    }

    fn run(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Compaction>, Error> {
        let sizer = Sizer::new(counter, messages);
        let tokens_before = sizer.count_all(messages)?;
        if tokens_before <= target_tokens {
            return Ok(None);
        }
        let Split { kept, note_index, removed } = self.split(messages, target_tokens, &sizer)?;
        if removed.is_empty() {
            return Ok(None);
        }
        let note_text = self.settings.omission_note.as_deref().filter(|note| !note.is_empty());
        let note = match note_text {
            None => None,
            // Swapping an earlier note for a new one frees nothing, and would rewrite the
            // conversation again at every following step.
            Some(_) if removed.iter().all(|&i| is_note(&messages[i])) => return Ok(None),
            Some(text) => Some(omission_note(text, removed.len(), kept.len())),
        };
        let mut compacted: Vec<Message> = kept.iter().map(|&i| messages[i].clone()).collect();
        let mut inserted = Vec::new();
        let after = match note {
            None => sizer.count(messages, &kept)?,
            Some(note) => {
                let sizer = sizer.rewritten(&kept, note_index, &note);
                compacted.insert(note_index, note);
                inserted.push(note_index);
                sizer.count_all(&compacted)?
            }
        };
        // The reference returns the rewritten conversation even when its note outweighs what it
        // removed. That breaks the first rule of a compactor and loses messages for nothing, so
        // this one declines.
        if after >= tokens_before {
            return Ok(None);
        }
        let mut report =
            CompactionReport::new(STRATEGY_SLIDING_WINDOW, tokens_before, after, target_tokens, Vec::new());
        report.removed = removed;
        report.inserted = inserted;
        Ok(Some(Compaction { edits: Edits::Whole(compacted), report }))
    }
}

/// Where keeping starts in `groups` (oldest first): groups are taken newest first while their
/// tokens fit `available`, and counting stops at the first that does not.
fn first_group_to_keep(
    messages: &[Message],
    groups: &[Vec<usize>],
    mut available: i128,
    sizer: &Sizer<'_>,
) -> Result<usize, Error> {
    let mut first_kept = groups.len();
    while first_kept > 0 {
        let tokens = sizer.count(messages, &groups[first_kept - 1])? as i128;
        if tokens > available {
            break;
        }
        available -= tokens;
        first_kept -= 1;
    }
    Ok(first_kept)
}

/// Whether `message` is a note this strategy left.
fn is_note(message: &Message) -> bool {
    is_compaction_message(message, STRATEGY_SLIDING_WINDOW, Some(Role::User))
}

fn omission_note(text: &str, removed: usize, kept: usize) -> Message {
    let mut marker = Map::new();
    marker.insert("strategy".into(), Value::String(STRATEGY_SLIDING_WINDOW.into()));
    marker.insert("removed_messages".into(), Value::from(removed));
    marker.insert("kept_messages".into(), Value::from(kept));
    let mut meta = Map::new();
    meta.insert(CONTEXT_COMPACTION.into(), Value::Object(marker));
    // A user message rather than a system one: not every provider takes several system messages.
    Message::user(text.replace(NUM_REMOVED_PLACEHOLDER, &removed.to_string())).with_meta(meta)
}

impl Compactor for SlidingWindowCompactor {
    /// The compacted conversation; `Ok(None)` when it already fits, when nothing may be
    /// removed, or when only an earlier note would go.
    fn try_compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Compaction>, Error> {
        self.run(messages, target_tokens, counter)
    }

    fn name(&self) -> &str {
        "SlidingWindowCompactor"
    }
}

impl Serialize for SlidingWindowCompactor {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.settings.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for SlidingWindowCompactor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(SlidingWindowCompactor { settings: SlidingWindowSettings::deserialize(deserializer)? })
    }
}

/// `min_keep_steps` of a strategy that allows 0 (the sliding window and the summarizer).
pub(crate) fn min_keep_steps(params: &InitParameters<'_>) -> Result<Option<usize>, Error> {
    match params.integer("min_keep_steps")? {
        None => Ok(None),
        Some(IntegerSetting::NonNegative(n)) => Ok(Some(n)),
        Some(IntegerSetting::Negative(n)) => Err(Error::NegativeMinKeepSteps(n)),
    }
}
