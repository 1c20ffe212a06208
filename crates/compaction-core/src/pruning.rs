//! [`ToolResultPruningCompactor`]: older tool results give way to a short placeholder.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use compaction_model::SharedObject;
use compaction_model::{
    JsonObject, Message, Part, Role, ToolCall, ToolCallResult, CONTEXT_COMPACTION,
    STRATEGY_TOOL_INPUT_CLEARING, STRATEGY_TOOL_RESULT_PRUNING,
};
use compaction_tokens::TokenCounter;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::compactor::{
    clear_arguments, Compaction, CompactionReport, Compactor, InputReport, Memo, PrunedResult, Rewrite,
    StandIns,
};
use crate::error::Error;
use crate::settings::PruningSettings;
use crate::steps::{
    protected_by_results, protected_by_steps, step_opener, walk, Replacement, RewrittenResult, Sizes,
};

/// Replaces the content of older tool results with a short placeholder, keeping every message
/// in place so each tool call keeps its result and the model can see what it ran.
///
/// It behaves as Haystack's `ToolResultPruningCompactor`: tool-result messages are visited
/// oldest first, those of the newest `min_keep_steps` agent steps that have results are never
/// visited, and pruning stops as soon as the running total is at or under the target. A message
/// is left alone when it already carries the `context_compaction` marker (any value), when its
/// meta holds one of `skip_meta_keys`, when its own count is at most `min_tokens`, or when the
/// placeholder would not make it smaller. A pruned message is a tool message holding the
/// placeholder with the result's origin call and error flag, and the original meta plus
/// `context_compaction: {"strategy": "tool_result_pruning", "original_tokens": N}`.
///
/// Unlike the reference, which reads only a message's first result and drops the rest, a
/// message holding several results, or a result beside text or calls, has each result judged
/// and pruned on its own (see [`PrunedResult`]); every result keeps its call id and the
/// message's other parts stay. A message holding one result and nothing else, the common case,
/// is pruned exactly as the reference prunes it.
///
/// The options beyond the reference are described on [`PruningSettings`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolResultPruningCompactor {
    settings: PruningSettings,
}

/// What a run decided: the rewrites, in the order they apply, and the report.
struct Plan {
    rewrites: Vec<(usize, Rewrite)>,
    report: CompactionReport,
}

impl ToolResultPruningCompactor {
    /// A compactor with `settings`, once they pass [`PruningSettings::validate`].
    ///
    /// # Errors
    ///
    /// When the settings fail [`PruningSettings::validate`].
    pub fn new(settings: PruningSettings) -> Result<Self, Error> {
        settings.validate()?;
        Ok(ToolResultPruningCompactor { settings })
    }

    /// Reads a compactor from its plain settings or Haystack's `to_dict` form.
    ///
    /// # Errors
    ///
    /// As [`PruningSettings::from_value`].
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        Self::new(PruningSettings::from_value(value)?)
    }

    /// The settings in use.
    pub fn settings(&self) -> &PruningSettings {
        &self.settings
    }

    /// A dry run: the report [`Compactor::try_compact`] would return. No message is built.
    ///
    /// # Errors
    ///
    /// As [`Compactor::try_compact`]: [`Error::Count`] when the counter could not count.
    pub fn plan(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<CompactionReport>, Error> {
        Ok(self.run(messages, target_tokens, counter, None)?.map(|plan| plan.report))
    }

    fn run(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
        memo: Option<&mut Memo>,
    ) -> Result<Option<Plan>, Error> {
        let start = memo.as_deref().map_or(0, |m| m.settled);
        let sizes = Sizes::measure(messages, start, counter)?;
        if sizes.total <= target_tokens {
            return Ok(None);
        }
        let protected = match self.settings.keep_tool_results {
            Some(keep) => protected_by_results(messages, keep),
            None => protected_by_steps(messages, self.settings.min_keep_steps),
        };
        let placeholder: Arc<str> = Arc::from(self.settings.placeholder.as_str());
        // Every placeholder of one tool renders alike, so it is counted once per tool and flag.
        let mut replacement_counts = HashMap::new();
        let mut prune = |index: usize, _: &Message, own: usize| {
            self.prune(&messages[index], own, &placeholder, &mut replacement_counts, counter)
        };
        let settled = memo.map(|m| &mut m.settled);
        let Some(walk) = walk(messages, &sizes, target_tokens, &protected, counter, &mut prune, settled)?
        else {
            return Ok(None);
        };
        if walk.replaced.is_empty() {
            return Ok(None);
        }
        let (replaced, mut report) = walk.finish(STRATEGY_TOOL_RESULT_PRUNING, target_tokens);
        let cleared = if self.settings.clear_tool_inputs {
            clear_inputs(messages, &sizes, &replaced, counter)?
        } else {
            Vec::new()
        };
        for (_, _, input) in &cleared {
            report.tokens_after = report.tokens_after.saturating_sub(input.tokens_freed);
        }
        report.estimated_tokens_after = report.tokens_after;
        report.inputs_cleared = cleared.iter().map(|(_, _, input)| input.clone()).collect();
        if self.settings.clear_at_least.is_some_and(|least| report.tokens_freed() < least) {
            return Ok(None);
        }
        let rewrites: Vec<(usize, Rewrite)> = replaced
            .into_iter()
            .map(|(index, replacement)| (index, Rewrite::Pruned(replacement.message)))
            .chain(cleared.into_iter().map(|(index, message, _)| (index, Rewrite::Message(message))))
            .collect();
        // The walk stopped on its running estimate, as the reference's does; the report says
        // what the conversation built from these rewrites counts.
        let stand_ins = StandIns::new(messages, &rewrites);
        let report = report.counted(sizes.count_rewritten(messages, &stand_ins.rewritten(), counter)?);
        Ok(Some(Plan { rewrites, report }))
    }

    /// How one tool-result message is pruned, or `None` to leave it.
    ///
    /// A message holding one result and nothing else is judged as the reference judges it, by
    /// its own count; its replacement is counted through a stand-in that renders as it will: a
    /// tool message with the placeholder and the tool's name. Counters see only the rendering
    /// (see [`TokenCounter`]), so the meta and the call's arguments and id, which the stand-in
    /// lacks, cannot change the count; `counted` keeps one count per tool name and error flag.
    ///
    /// Any other message (several results, or a result beside text or calls) has each result
    /// judged on its own: by the count of a tool message holding only that result, against
    /// `min_tokens` and `exclude_tools`, and kept pruned only when the message gets smaller.
    fn prune<'a>(
        &self,
        message: &'a Message,
        own: usize,
        placeholder: &Arc<str>,
        counted: &mut HashMap<(&'a str, bool), usize>,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Replacement<PrunedResult>>, Error> {
        if !message.has_tool_call_result()
            || message.meta.contains_key(CONTEXT_COMPACTION)
            || self.settings.skip_meta_keys.iter().any(|key| message.meta.contains_key(key))
        {
            return Ok(None);
        }
        let count_one =
            |message: &Message| counter.try_count(std::slice::from_ref(message), &[]).map_err(Error::Count);
        let excluded = |result: &ToolCallResult| {
            !self.settings.exclude_tools.is_empty()
                && self.settings.exclude_tools.contains(&result.origin.tool_name)
        };
        let mut pruned = PrunedResult {
            placeholder: Arc::clone(placeholder),
            original_tokens: own,
            clear_arguments: self.settings.clear_tool_inputs,
            results: Vec::new(),
            preview_chars: self.settings.preview_chars,
        };
        if let [Part::ToolCallResult(result)] = message.parts.as_slice() {
            if own <= self.settings.min_tokens || excluded(result) {
                return Ok(None);
            }
            let tool_name = result.origin.tool_name.as_str();
            let stand_in = |text: String| {
                count_one(&Message::tool(text, ToolCall::new(tool_name, JsonObject::new()), result.error))
            };
            let replacement_tokens = if pruned.preview_chars == 0 {
                match counted.entry((tool_name, result.error)) {
                    Entry::Occupied(entry) => *entry.get(),
                    Entry::Vacant(entry) => *entry.insert(stand_in(pruned.text(tool_name))?),
                }
            } else {
                // A preview differs from result to result, so each is counted.
                stand_in(pruned.replacement_text(result))?
            };
            let rewritten =
                RewrittenResult { position: 0, tokens_before: own, tokens_after: replacement_tokens };
            return Ok((replacement_tokens < own).then(|| Replacement {
                message: pruned,
                original_tokens: own,
                replacement_tokens,
                results: vec![rewritten],
            }));
        }
        let mut current = own;
        let mut rewritten = Vec::new();
        let mut selected = Vec::new();
        for (position, result) in message.tool_call_results().enumerate() {
            if excluded(result) {
                continue;
            }
            let parts = vec![Part::ToolCallResult(result.clone())];
            let alone = Message { role: Role::Tool, parts, name: None, meta: SharedObject::new() };
            if count_one(&alone)? <= self.settings.min_tokens {
                continue;
            }
            selected.push(position);
            pruned.results.clone_from(&selected);
            let after = count_one(&pruned.build(message))?;
            if after < current {
                rewritten.push(RewrittenResult { position, tokens_before: current, tokens_after: after });
                current = after;
            } else {
                // This result's placeholder would not make the message smaller.
                selected.pop();
            }
        }
        if rewritten.is_empty() {
            return Ok(None);
        }
        pruned.results = selected;
        Ok(Some(Replacement {
            message: pruned,
            original_tokens: own,
            replacement_tokens: current,
            results: rewritten,
        }))
    }
}

/// The assistant messages whose calls answered by a pruned result get `{}` as arguments.
///
/// A call is looked for only in the assistant message that opens the result's agent step, so
/// a result that follows no assistant message clears nothing. A message that already carries a
/// marker of another strategy is left as it is, so no earlier record is overwritten.
fn clear_inputs<M>(
    messages: &[Message],
    sizes: &Sizes,
    replaced: &[(usize, Replacement<M>)],
    counter: &dyn TokenCounter,
) -> Result<Vec<(usize, Message, InputReport)>, Error> {
    // Per assistant message, the positions (within its parts) of the calls to clear.
    let mut wanted: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (index, replacement) in replaced {
        let Some(assistant) = step_opener(messages, *index) else { continue };
        let results: Vec<&ToolCallResult> = messages[*index].tool_call_results().collect();
        let positions: Vec<usize> = if replacement.results.is_empty() {
            vec![0]
        } else {
            replacement.results.iter().map(|r| r.position).collect()
        };
        for origin in positions.iter().filter_map(|&p| results.get(p)).map(|r| &r.origin) {
            let position = messages[assistant].parts.iter().position(|part| match part {
                Part::ToolCall(call) => match &origin.id {
                    Some(id) => call.id.as_ref() == Some(id),
                    None => {
                        call.id.is_none()
                            && call.tool_name == origin.tool_name
                            && call.arguments == origin.arguments
                            && call.raw_arguments == origin.raw_arguments
                    }
                },
                _ => false,
            });
            if let Some(position) = position {
                let list = wanted.entry(assistant).or_default();
                if !list.contains(&position) {
                    list.push(position);
                }
            }
        }
    }
    let mut cleared = Vec::new();
    for (assistant, positions) in wanted {
        let original = &messages[assistant];
        let earlier = original.meta.get(CONTEXT_COMPACTION);
        let earlier = match earlier {
            None => None,
            Some(marker)
                if marker.get("strategy").and_then(Value::as_str) == Some(STRATEGY_TOOL_INPUT_CLEARING) =>
            {
                Some(marker)
            }
            Some(_) => continue,
        };
        let mut message = original.clone();
        let mut call_ids: Vec<Option<String>> = Vec::new();
        for position in positions {
            if let Part::ToolCall(call) = &mut message.parts[position] {
                if !call.has_no_arguments() {
                    clear_arguments(call);
                    call_ids.push(call.id.clone());
                }
            }
        }
        if call_ids.is_empty() {
            continue;
        }
        let own = sizes.own(messages, assistant, counter)?;
        let mut recorded: Vec<Value> = earlier
            .and_then(|m| m.get("cleared_call_ids"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        recorded.extend(call_ids.iter().map(|id| id.clone().map_or(Value::Null, Value::String)));
        let first_count = earlier.and_then(|m| m.get("original_tokens")).cloned().unwrap_or(Value::from(own));
        let mut marker = serde_json::Map::new();
        marker.insert("strategy".into(), Value::String(STRATEGY_TOOL_INPUT_CLEARING.into()));
        marker.insert("original_tokens".into(), first_count);
        marker.insert("cleared_call_ids".into(), Value::Array(recorded));
        message.meta.insert(CONTEXT_COMPACTION.into(), Value::Object(marker));
        let after = counter.try_count(std::slice::from_ref(&message), &[]).map_err(Error::Count)?;
        // Clearing that frees nothing would only invalidate the prompt cache.
        if after >= own {
            continue;
        }
        let report = InputReport {
            index: assistant,
            call_ids,
            original_tokens: own,
            replacement_tokens: after,
            tokens_freed: own - after,
        };
        cleared.push((assistant, message, report));
    }
    Ok(cleared)
}

impl Compactor for ToolResultPruningCompactor {
    fn try_compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Compaction>, Error> {
        Ok(self.run(messages, target_tokens, counter, None)?.map(Plan::into_compaction))
    }

    fn name(&self) -> &str {
        "ToolResultPruningCompactor"
    }

    fn compact_with_memo(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
        memo: &mut Memo,
    ) -> Result<Option<Compaction>, Error> {
        Ok(self.run(messages, target_tokens, counter, Some(memo))?.map(Plan::into_compaction))
    }
}

impl Plan {
    fn into_compaction(self) -> Compaction {
        Compaction::rewriting(self.rewrites, self.report)
    }
}

impl Serialize for ToolResultPruningCompactor {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.settings.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ToolResultPruningCompactor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `PruningSettings` validates as it reads.
        Ok(ToolResultPruningCompactor { settings: PruningSettings::deserialize(deserializer)? })
    }
}
