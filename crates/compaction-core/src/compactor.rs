//! The [`Compactor`] trait and the report every compaction returns.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use compaction_model::{Arguments, SharedObject};
use compaction_model::{
    Changes, CompactionMarker, JsonObject, Message, Part, ResultPart, Role, ToolCall, ToolCallResult,
    ToolResultContent, ToolSpec, STRATEGY_TOOL_RESULT_PRUNING,
};
use compaction_tokens::TokenCounter;
use serde::Serialize;

use crate::error::Error;
use crate::steps::{Replacement, RewrittenResult};

/// The future [`Compactor::compact_async`] returns.
pub type CompactFuture<'a> = Pin<Box<dyn Future<Output = Result<Option<Compaction>, Error>> + Send + 'a>>;

/// What a compactor remembers about one conversation between calls, so that a long agent run
/// does not make every call walk the whole conversation again.
///
/// The caller keeps one memo per compactor and conversation (the compaction hook keeps it in the
/// agent state), hands it to [`Compactor::compact_with_memo`] each time, and keeps the promise
/// that makes it sound: the first [`Memo::settled`] messages are unchanged since the call that
/// left the memo, except for in-place rewrites the caller reported with [`Memo::rewritten`]. After
/// anything else (messages removed, inserted or reordered), the caller starts a fresh memo.
///
/// A strategy that rewrites tool results in place notes how far, from the start, every message
/// is *settled* — it would leave the message as it is whatever the target, now and after any
/// number of appended messages — and walks only the rest next time. A compactor that remembers
/// nothing ignores the memo.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Memo {
    /// How many leading messages are settled.
    pub settled: usize,
    /// The memos of a chain's stages, in order.
    pub stages: Vec<Memo>,
}

impl Memo {
    /// Notes that the messages at `indices` were rewritten in place: what they were settled as
    /// no longer holds.
    pub fn rewritten(&mut self, indices: impl IntoIterator<Item = usize>) {
        if let Some(first) = indices.into_iter().min() {
            self.lower(first);
        }
    }

    /// Forgets what was settled from `index` on, in this memo and every stage's.
    pub fn lower(&mut self, index: usize) {
        self.settled = self.settled.min(index);
        for stage in &mut self.stages {
            stage.lower(index);
        }
    }
}

/// Rewrites a conversation into a shorter one that carries the same working context.
///
/// A compactor is the *how* of compaction; deciding *when* is the caller's job (see the
/// compaction-hook crate). Every implementation keeps three rules:
///
/// 1. It returns `None` unless the conversation actually gets smaller.
/// 2. It never changes its input; the shorter conversation is a new `Vec`.
/// 3. It never separates a tool call from its results: no result without its call, no call
///    without all of its results. Chat APIs reject such conversations.
///
/// `target_tokens` is a goal, not a promise: a compactor that cannot reach it gets as close as
/// its rules allow.
///
/// The trait is object safe, so a hook can hold any strategy as `Box<dyn Compactor>`.
///
/// # Failures
///
/// Compacting can fail: a counter that could not count (a provider's, over the network), or a
/// model that could not summarize when the strategy is set to fail rather than keep what it had.
/// A failure is an `Err` of [`Compactor::try_compact`], with its cause as the source, as
/// Haystack's compactors raise; there is no infallible form that would turn it into "nothing to
/// compact". With a local counter and a strategy that asks no model, `try_compact` never fails.
///
/// An implementation writes two methods, [`Compactor::try_compact`] and [`Compactor::name`];
/// [`Compactor::compact_with_memo`] and [`Compactor::compact_async`] are provided.
pub trait Compactor: Send + Sync + fmt::Debug {
    /// A shorter replacement for `messages` with a report of what changed, or `Ok(None)` to leave
    /// the conversation as it is. `counter` is the one the caller sized the context with; a
    /// compactor counts through its fallible counts ([`TokenCounter::try_count`] and the like),
    /// so that a count that fails is this method's error, never an estimate taken for a count.
    ///
    /// # Errors
    ///
    /// Whatever kept the strategy from compacting, with its cause as the source: a count that
    /// failed ([`Error::Count`]), a summary that could not be had, a chain's stage that failed.
    fn try_compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Compaction>, Error>;

    /// The strategy's name, as reports and traces show it (Haystack's class name, such as
    /// `ToolResultPruningCompactor`).
    fn name(&self) -> &str;

    /// [`Compactor::try_compact`] for a caller that compacts one conversation again and again (an
    /// agent loop), with what this compactor remembered of it last time; see [`Memo`]. Gives the
    /// same answer as `try_compact`, in less time. The default ignores the memo.
    ///
    /// # Errors
    ///
    /// As [`Compactor::try_compact`].
    fn compact_with_memo(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
        memo: &mut Memo,
    ) -> Result<Option<Compaction>, Error> {
        let _ = memo;
        self.try_compact(messages, target_tokens, counter)
    }

    /// [`Compactor::try_compact`], for an async caller. A strategy that waits on I/O (a model
    /// call) overrides it so that no runtime thread blocks; the default runs `try_compact` when
    /// first polled, which is right for strategies that only compute.
    fn compact_async<'a>(
        &'a self,
        messages: &'a [Message],
        target_tokens: usize,
        counter: &'a dyn TokenCounter,
    ) -> CompactFuture<'a> {
        Box::pin(async move { self.try_compact(messages, target_tokens, counter) })
    }
}

impl<T: Compactor + ?Sized> Compactor for std::sync::Arc<T> {
    fn try_compact(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Compaction>, Error> {
        (**self).try_compact(messages, target_tokens, counter)
    }

    fn name(&self) -> &str {
        (**self).name()
    }

    fn compact_with_memo(
        &self,
        messages: &[Message],
        target_tokens: usize,
        counter: &dyn TokenCounter,
        memo: &mut Memo,
    ) -> Result<Option<Compaction>, Error> {
        (**self).compact_with_memo(messages, target_tokens, counter, memo)
    }

    fn compact_async<'a>(
        &'a self,
        messages: &'a [Message],
        target_tokens: usize,
        counter: &'a dyn TokenCounter,
    ) -> CompactFuture<'a> {
        (**self).compact_async(messages, target_tokens, counter)
    }
}

/// A compaction: how the conversation changes, and a report of what was done.
///
/// A compaction does not copy the conversation. It holds only what changes — for the
/// tool-result strategies, a description of each rewritten message — so compacting a 50 MB
/// conversation costs what deciding costs, not a copy of 50 MB. [`Compaction::messages`] builds
/// the new conversation beside the old one; [`Compaction::apply`] rewrites an owned conversation
/// in place, reusing what each rewritten message keeps of its original.
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a compaction changes nothing until it is applied or its messages are built"]
pub struct Compaction {
    /// How the conversation changes; private, so that every compaction is built by a
    /// constructor that keeps the rewrites in order.
    pub(crate) edits: Edits,
    /// What changed.
    pub report: CompactionReport,
}

/// How a compaction changes a conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Edits {
    /// Messages rewritten in place, by index, in increasing order; every other message stays.
    Replace(Vec<(usize, Rewrite)>),
    /// A whole new conversation, for strategies that drop or merge messages.
    Whole(Vec<Message>),
}

/// How one message of the conversation is rewritten.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rewrite {
    /// This message takes the original's place.
    Message(Message),
    /// The original's tool result gives way to a placeholder; see [`PrunedResult`].
    Pruned(PrunedResult),
}

/// A tool-result message whose results give way to a placeholder, described against the
/// original message.
///
/// Each pruned result keeps its place, its call (the arguments emptied when `clear_arguments`
/// is set) and its error flag; its content becomes `placeholder` with `{tool_name}` replaced by
/// the tool's name (with `preview_chars`, framed by the first and last characters of its text).
/// The message's meta gets the [`CompactionMarker`] of strategy `tool_result_pruning` and
/// `original_tokens`. A message made only of tool results becomes a tool message, as in
/// Haystack, and keeps its name, which Haystack drops; a message that also holds text, calls or
/// other parts keeps them, its role and its name. Results not selected stay as they are.
///
/// For a message holding one result and nothing else (the common case) the rewrite is exactly
/// Haystack's but for the name. Haystack keeps only the first result of a message and drops its
/// other parts; this keeps every one of them, so no call loses its result.
///
/// Describing the rewrite instead of holding the new message lets [`Compaction::apply`] edit the
/// original in place instead of copying it, and lets a dry run skip building it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedResult {
    /// The placeholder text, with `{tool_name}` standing for the tool's name.
    pub placeholder: Arc<str>,
    /// The original message's own token count, recorded in the marker.
    pub original_tokens: usize,
    /// Whether the pruned calls' arguments are emptied (`clear_tool_inputs`): `{}`, and no raw
    /// argument text.
    pub clear_arguments: bool,
    /// Which results are pruned, by position among the message's tool results (0 is the first),
    /// in increasing order. Empty means every result of the message.
    pub results: Vec<usize>,
    /// Characters of each pruned text kept at its start and at its end around the placeholder;
    /// 0 keeps none (the reference's blank placeholder).
    pub preview_chars: usize,
}

impl PrunedResult {
    /// A description pruning every result of a message to `placeholder`, with no preview and
    /// the arguments kept.
    pub fn new(placeholder: impl Into<Arc<str>>, original_tokens: usize) -> Self {
        PrunedResult {
            placeholder: placeholder.into(),
            original_tokens,
            clear_arguments: false,
            results: Vec::new(),
            preview_chars: 0,
        }
    }

    /// The placeholder text for a result of `tool_name`, without a preview.
    pub fn text(&self, tool_name: &str) -> String {
        self.placeholder.replace("{tool_name}", tool_name)
    }

    /// The text that replaces `result`: the placeholder, framed by the first and last
    /// `preview_chars` characters of the result's text when a preview is asked for.
    ///
    /// The preview is taken from the result's text (its text parts joined by newlines, for a
    /// result made of parts). A text no longer than twice `preview_chars` is not cut: the
    /// placeholder then follows the whole text, which frees nothing, so the compactor leaves
    /// such a result as it is.
    pub fn replacement_text(&self, result: &ToolCallResult) -> String {
        let placeholder = self.text(&result.origin.tool_name);
        if self.preview_chars == 0 {
            return placeholder;
        }
        let joined;
        let text: &str = match &result.result {
            ToolResultContent::Text(text) => text.as_str(),
            ToolResultContent::Parts(parts) => {
                joined = parts
                    .iter()
                    .filter_map(|part| match part {
                        ResultPart::Text(t) => Some(t.text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                &joined
            }
        };
        preview_around(text, &placeholder, self.preview_chars)
    }

    /// Whether the result at `position` (among the message's results) is pruned.
    fn selects(&self, position: usize) -> bool {
        self.results.is_empty() || self.results.binary_search(&position).is_ok()
    }

    /// The pruned message built from `original`, which is left as it is. A message without a
    /// tool result has nothing to prune and is returned unchanged.
    pub fn build(&self, original: &Message) -> Message {
        if !original.has_tool_call_result() {
            return original.clone();
        }
        let mut meta = original.meta.clone();
        CompactionMarker::new(STRATEGY_TOOL_RESULT_PRUNING, self.original_tokens as u64).write_to(&mut meta);
        self.build_with(original, |result| self.pruned(result), meta)
    }

    /// A message that renders as [`PrunedResult::build`]'s does, and so counts alike (see
    /// [`TokenCounter`]), made without copying what the rendering leaves out: the meta, and the
    /// arguments and ids of the pruned results' calls. For counting what a compaction makes.
    pub(crate) fn stand_in(&self, original: &Message) -> Message {
        if !original.has_tool_call_result() {
            return original.clone();
        }
        let stand_in = |result: &ToolCallResult| {
            let call = ToolCall::new(result.origin.tool_name.clone(), JsonObject::new());
            ToolCallResult::new(self.replacement_text(result).into(), call, result.error)
        };
        self.build_with(original, stand_in, SharedObject::new())
    }

    /// `original` with each selected result replaced by what `prune` makes of it, every other
    /// part copied, and `meta`; a message of results only becomes a tool message.
    fn build_with(
        &self,
        original: &Message,
        prune: impl Fn(&ToolCallResult) -> ToolCallResult,
        meta: SharedObject,
    ) -> Message {
        let only_results = original.parts.iter().all(|p| matches!(p, Part::ToolCallResult(_)));
        let mut position = 0;
        let parts = original
            .parts
            .iter()
            .map(|part| match part {
                Part::ToolCallResult(result) => {
                    let selected = self.selects(position);
                    position += 1;
                    if selected {
                        Part::ToolCallResult(prune(result))
                    } else {
                        part.clone()
                    }
                }
                other => other.clone(),
            })
            .collect();
        let role = if only_results { Role::Tool } else { original.role };
        Message { role, parts, name: original.name.clone(), meta }
    }

    /// One pruned result, built from the original.
    fn pruned(&self, result: &ToolCallResult) -> ToolCallResult {
        let text = self.replacement_text(result);
        let mut origin = result.origin.clone();
        if self.clear_arguments {
            clear_arguments(&mut origin);
        }
        ToolCallResult::new(text.into(), origin, result.error)
    }

    /// Rewrites `message` into the pruned message in place: each selected result keeps its place
    /// with the placeholder for content; every other part stays. A message without a tool result
    /// has nothing to prune and is left as it is.
    pub fn rewrite(&self, message: &mut Message) {
        if !message.has_tool_call_result() {
            return;
        }
        let mut only_results = true;
        let mut position = 0;
        for part in &mut message.parts {
            let Part::ToolCallResult(result) = part else {
                only_results = false;
                continue;
            };
            let selected = self.selects(position);
            position += 1;
            if !selected {
                continue;
            }
            let text = self.replacement_text(result);
            if self.clear_arguments {
                clear_arguments(&mut result.origin);
            }
            result.result = ToolResultContent::Text(text.into());
            result.unknown = SharedObject::new();
        }
        if only_results {
            message.role = Role::Tool;
        }
        CompactionMarker::new(STRATEGY_TOOL_RESULT_PRUNING, self.original_tokens as u64)
            .write_to(&mut message.meta);
    }
}

/// Empties a call's arguments: `{}`, and no raw argument text.
pub(crate) fn clear_arguments(call: &mut ToolCall) {
    call.arguments = Arguments::new();
    call.raw_arguments = None;
}

/// `placeholder` framed by the first and last `keep` characters of `text`, or by the whole text
/// when it is no longer than `2 * keep` characters.
fn preview_around(text: &str, placeholder: &str, keep: usize) -> String {
    let head_end = text.char_indices().nth(keep).map_or(text.len(), |(byte, _)| byte);
    if head_end == text.len() {
        return format!("{text}\n{placeholder}");
    }
    // The tail starts `keep` characters before the end, but never inside the head.
    let tail_start = text.char_indices().rev().nth(keep.saturating_sub(1)).map_or(0, |(byte, _)| byte);
    if tail_start <= head_end {
        return format!("{text}\n{placeholder}");
    }
    format!("{}...\n{placeholder}\n...{}", &text[..head_end], &text[tail_start..])
}

impl Rewrite {
    /// The rewritten message, built from `original`.
    pub fn build(&self, original: &Message) -> Message {
        match self {
            Rewrite::Message(message) => message.clone(),
            Rewrite::Pruned(pruned) => pruned.build(original),
        }
    }

    /// A message that renders as [`Rewrite::build`]'s does (see [`PrunedResult::stand_in`]).
    fn stand_in(&self, original: &Message) -> Message {
        match self {
            Rewrite::Message(message) => message.clone(),
            Rewrite::Pruned(pruned) => pruned.stand_in(original),
        }
    }

    /// Rewrites `message` (the original) in place.
    pub fn apply(self, message: &mut Message) {
        match self {
            Rewrite::Message(replacement) => *message = replacement,
            Rewrite::Pruned(pruned) => pruned.rewrite(message),
        }
    }

    /// [`Rewrite::apply`] without giving the rewrite up.
    fn apply_ref(&self, message: &mut Message) {
        match self {
            Rewrite::Message(replacement) => message.clone_from(replacement),
            Rewrite::Pruned(pruned) => pruned.rewrite(message),
        }
    }
}

impl Compaction {
    /// A compaction that replaces messages in place. `replacements` need not be sorted.
    ///
    /// # Errors
    ///
    /// [`Error::DuplicateEdit`] when an index is given twice: one of its two messages would be
    /// lost.
    pub fn replacing(replacements: Vec<(usize, Message)>, report: CompactionReport) -> Result<Self, Error> {
        let mut indices: Vec<usize> = replacements.iter().map(|(index, _)| *index).collect();
        indices.sort_unstable();
        if let Some(pair) = indices.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(Error::DuplicateEdit { index: pair[0] });
        }
        Ok(Self::rewriting(
            replacements.into_iter().map(|(index, message)| (index, Rewrite::Message(message))).collect(),
            report,
        ))
    }

    /// A compaction that replaces the whole conversation with `messages`, for strategies that
    /// drop or merge messages.
    pub fn whole(messages: Vec<Message>, report: CompactionReport) -> Self {
        Compaction { edits: Edits::Whole(messages), report }
    }

    /// A compaction that rewrites messages in place. `rewrites` need not be sorted; several
    /// rewrites of one index are applied one after another, in the order given.
    pub fn rewriting(mut rewrites: Vec<(usize, Rewrite)>, report: CompactionReport) -> Self {
        rewrites.sort_by_key(|(index, _)| *index);
        Compaction { edits: Edits::Replace(rewrites), report }
    }

    /// The compacted conversation, built from `original` (the conversation that was compacted).
    ///
    /// Built as given: an edit that cannot be placed in `original` changes nothing. Call
    /// [`Compaction::check`] first for a conversation other than the one compacted, or use
    /// [`Compaction::apply`], which refuses such an edit.
    pub fn messages(&self, original: &[Message]) -> Vec<Message> {
        match &self.edits {
            Edits::Replace(rewrites) => {
                // As `apply` does it: the rewrites of one index one after another, in the order
                // given (a stable sort keeps it), each on what the one before left.
                let mut sorted: Vec<&(usize, Rewrite)> = rewrites.iter().collect();
                sorted.sort_by_key(|(index, _)| *index);
                let mut sorted = sorted.into_iter().peekable();
                let mut messages = Vec::with_capacity(original.len());
                for (index, message) in original.iter().enumerate() {
                    let mut rewritten: Option<Message> = None;
                    while let Some((_, rewrite)) = sorted.next_if(|(at, _)| *at == index) {
                        match &mut rewritten {
                            // The first is built from the original, which it need not copy first.
                            None => rewritten = Some(rewrite.build(message)),
                            Some(message) => rewrite.apply_ref(message),
                        }
                    }
                    messages.push(rewritten.unwrap_or_else(|| message.clone()));
                }
                messages
            }
            Edits::Whole(messages) => messages.clone(),
        }
    }

    /// Rewrites `messages` (the conversation that was compacted) into the compacted one in
    /// place: untouched messages are not copied, and a rewritten one keeps what it can of its
    /// original without copying it. Returns the report.
    ///
    /// # Errors
    ///
    /// [`Error::MisplacedEdit`] when an edit cannot be placed in `messages` (see
    /// [`Compaction::check`]), which is then left as it was: nothing is applied.
    pub fn apply(self, messages: &mut Vec<Message>) -> Result<CompactionReport, Error> {
        self.check(messages)?;
        match self.edits {
            Edits::Replace(rewrites) => {
                for (index, rewrite) in rewrites {
                    rewrite.apply(&mut messages[index]);
                }
            }
            Edits::Whole(whole) => *messages = whole,
        }
        Ok(self.report)
    }

    /// Whether every edit can be placed in `conversation`: each rewritten index is in it, and a
    /// tool-result rewrite ([`Rewrite::Pruned`]) lands on a message holding the tool results it
    /// selects. True of the conversation the compaction was made from.
    ///
    /// # Errors
    ///
    /// [`Error::MisplacedEdit`] naming the first edit that cannot be placed, and why.
    pub fn check(&self, conversation: &[Message]) -> Result<(), Error> {
        let Edits::Replace(rewrites) = &self.edits else { return Ok(()) };
        for (index, rewrite) in rewrites {
            let misplaced = |reason: String| Error::MisplacedEdit { index: *index, reason };
            let Some(message) = conversation.get(*index) else {
                return Err(misplaced(format!("the conversation has {} messages", conversation.len())));
            };
            if let Rewrite::Pruned(pruned) = rewrite {
                let results = message.tool_call_results().count();
                if results == 0 {
                    return Err(misplaced("the message holds no tool result to prune".to_owned()));
                }
                if let Some(position) = pruned.results.iter().find(|&&position| position >= results) {
                    return Err(misplaced(format!(
                        "tool result {position} is to be pruned, but the message holds {results}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Tokens of the compacted conversation sent with `tools`, as
    /// `counter.try_count(&self.messages(original), tools)` says, building only the messages that
    /// change (see [`TokenCounter::try_count_rewritten`]). `original` is the conversation that
    /// was compacted.
    ///
    /// # Errors
    ///
    /// The counter's, when it could not count.
    pub fn try_count(
        &self,
        original: &[Message],
        counter: &dyn TokenCounter,
        tools: &[ToolSpec],
    ) -> Result<usize, compaction_tokens::Error> {
        match &self.edits {
            Edits::Replace(rewrites) => count_rewrites(original, rewrites, counter, tools),
            Edits::Whole(messages) => counter.try_count(messages, tools),
        }
    }

    /// What the compaction changes of `original` (the conversation that was compacted), as a
    /// write-back takes it: the indices of the messages rewritten in place, or, when messages are
    /// dropped or put in, where each message of the compacted conversation comes from (from the
    /// report's removed and inserted messages; [`Changes::Unknown`] when they do not account for
    /// the compacted conversation).
    pub fn changes(&self, original: &[Message]) -> Changes {
        match &self.edits {
            Edits::Replace(rewrites) => Changes::in_place(rewrites.iter().map(|(index, _)| *index).collect()),
            Edits::Whole(messages) => Changes::dropping_and_inserting(
                original.len(),
                messages.len(),
                &self.report.removed,
                &self.report.inserted,
            ),
        }
    }
}

/// `counter`'s count of `original` with `rewrites` applied (as [`Compaction::apply`] applies
/// them), building only the rewritten messages.
pub(crate) fn count_rewrites(
    original: &[Message],
    rewrites: &[(usize, Rewrite)],
    counter: &dyn TokenCounter,
    tools: &[ToolSpec],
) -> Result<usize, compaction_tokens::Error> {
    let stand_ins = StandIns::new(original, rewrites);
    counter.try_count_rewritten(original, &stand_ins.rewritten(), tools)
}

/// Messages that render as those a compaction's rewrites make of a conversation (see
/// [`PrunedResult::stand_in`]): what a count of the compacted conversation needs.
pub(crate) struct StandIns {
    /// The messages; one serves every message whose placeholder renders alike.
    messages: Vec<Message>,
    /// For each rewritten index, in increasing order, its message in `messages`.
    at: Vec<(usize, usize)>,
}

impl StandIns {
    /// The stand-ins for `rewrites` of `original`. A message holding one result and nothing
    /// else, pruned to a placeholder without a preview, renders as a tool message of its tool's
    /// placeholder, so all such messages of one tool (and error flag) share one stand-in.
    pub(crate) fn new(original: &[Message], rewrites: &[(usize, Rewrite)]) -> StandIns {
        let mut sorted: Vec<&(usize, Rewrite)> =
            rewrites.iter().filter(|(index, _)| *index < original.len()).collect();
        sorted.sort_by_key(|(index, _)| *index);
        let mut messages: Vec<Message> = Vec::new();
        let mut at: Vec<(usize, usize)> = Vec::with_capacity(sorted.len());
        let mut shared: HashMap<(&str, bool, *const u8), usize> = HashMap::new();
        let mut rest = sorted.as_slice();
        while let [(index, first), ..] = rest {
            let group = rest.iter().take_while(|(i, _)| i == index).count();
            let message = &original[*index];
            let alike = match (group, first, message.parts.as_slice()) {
                (1, Rewrite::Pruned(pruned), [Part::ToolCallResult(result)]) if pruned.preview_chars == 0 => {
                    Some((result.origin.tool_name.as_str(), result.error, pruned.placeholder.as_ptr()))
                }
                _ => None,
            };
            let slot = match alike.and_then(|key| shared.get(&key).copied()) {
                Some(slot) => slot,
                None => {
                    let mut built = first.stand_in(message);
                    for (_, rewrite) in &rest[1..group] {
                        rewrite.apply_ref(&mut built);
                    }
                    messages.push(built);
                    if let Some(key) = alike {
                        shared.insert(key, messages.len() - 1);
                    }
                    messages.len() - 1
                }
            };
            at.push((*index, slot));
            rest = &rest[group..];
        }
        StandIns { messages, at }
    }

    /// Each rewritten index with its stand-in, in increasing order.
    pub(crate) fn rewritten(&self) -> Vec<(usize, &Message)> {
        self.at.iter().map(|&(index, slot)| (index, &self.messages[slot])).collect()
    }
}

/// What a compaction did: the sizes before and after, and each rewritten tool result.
// Not `#[must_use]`: `Compaction::apply` hands the report back as a convenience, and a caller
// that applied the compaction has used it. What only yields a report is marked instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompactionReport {
    /// The strategy that ran.
    pub strategy: String,
    /// Tokens of the whole conversation before compacting.
    pub tokens_before: usize,
    /// Tokens of the compacted conversation, counted as a whole with the compactor's counter:
    /// what `counter.count(&compaction.messages(&original), &[])` says.
    pub tokens_after: usize,
    /// Tokens after as the compactor estimated them while it worked, which decides when it
    /// stops. For the strategies that rewrite tool results in place (pruning, offloading) this
    /// is the reference's running estimate: the count before, less what each rewritten message
    /// frees counted on its own. A counter's counts need not add up message by message (the
    /// approximate counter rounds each count down, a tokenizer may merge text across a message
    /// boundary), so it can be off from `tokens_after` by a few tokens, either way. Equal to
    /// `tokens_after` for the strategies that count what they build (sliding window,
    /// summarization, chains).
    pub estimated_tokens_after: usize,
    /// The target the compactor was given.
    pub target_tokens: usize,
    /// Whether `tokens_after` (the count, not the estimate) is at or under the target.
    pub target_reached: bool,
    /// Every tool result that was rewritten, oldest first.
    pub results: Vec<ResultReport>,
    /// Every assistant message whose tool-call arguments were cleared, oldest first (only with
    /// the pruning compactor's `clear_tool_inputs`).
    pub inputs_cleared: Vec<InputReport>,
    /// The messages of the original conversation that are no longer in it (dropped by a
    /// sliding window, replaced by a summary), by index, in increasing order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<usize>,
    /// The messages the compaction put in (an omission note, a summary), by their index in the
    /// compacted conversation, in increasing order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inserted: Vec<usize>,
    /// For a chain of strategies: the report of each that compacted, in the order they ran.
    /// Each describes the conversation its strategy was given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<CompactionReport>,
    /// Why the strategy stopped short when a step failed and it kept what it had done before
    /// (a summary the model could not write), in words; the failure is also logged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// One rewritten tool result.
///
/// A message holding one result gets one entry, with the message's counts. A message holding
/// several gets one entry per rewritten result, in message order; each entry's counts are the
/// message's just before and just after that result was rewritten, so the entries of a message
/// add up to what the message frees, and the last one's `replacement_tokens` is the count of the
/// message built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResultReport {
    /// The message's index in the conversation.
    pub index: usize,
    /// The result's position among the message's tool results (0 is the first).
    pub position: usize,
    /// The tool that produced the result.
    pub tool_name: String,
    /// The id of the call the result answers, if it has one.
    pub call_id: Option<String>,
    /// The message's tokens before.
    pub original_tokens: usize,
    /// The message's tokens after.
    pub replacement_tokens: usize,
    /// Tokens freed: `original_tokens - replacement_tokens`.
    pub tokens_freed: usize,
}

/// One assistant message whose tool-call arguments were replaced with `{}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputReport {
    /// The message's index in the conversation.
    pub index: usize,
    /// The ids of the cleared calls, `None` for a call without one, in call order.
    pub call_ids: Vec<Option<String>>,
    /// The message's tokens before.
    pub original_tokens: usize,
    /// The message's tokens after.
    pub replacement_tokens: usize,
    /// Tokens freed: `original_tokens - replacement_tokens`.
    pub tokens_freed: usize,
}

impl ResultReport {
    /// The entry for the tool-result message `original`, at `index`, rewritten as `replacement`:
    /// its first result, with the message's counts.
    pub fn new<R>(index: usize, original: &Message, replacement: &Replacement<R>) -> Self {
        Self::for_result(
            index,
            original,
            &RewrittenResult {
                position: 0,
                tokens_before: replacement.original_tokens,
                tokens_after: replacement.replacement_tokens,
            },
        )
    }

    /// The entry for one result of the message `original`, at `index`.
    pub fn for_result(index: usize, original: &Message, rewritten: &RewrittenResult) -> Self {
        let origin = original.tool_call_results().nth(rewritten.position).map(|r| &r.origin);
        ResultReport {
            index,
            position: rewritten.position,
            tool_name: origin.map(|o| o.tool_name.clone()).unwrap_or_default(),
            call_id: origin.and_then(|o| o.id.clone()),
            original_tokens: rewritten.tokens_before,
            replacement_tokens: rewritten.tokens_after,
            tokens_freed: rewritten.tokens_before.saturating_sub(rewritten.tokens_after),
        }
    }
}

impl CompactionReport {
    /// A report with no cleared inputs; `target_reached` is worked out from the sizes, and the
    /// estimate after is `tokens_after` (see [`CompactionReport::counted`]).
    pub fn new(
        strategy: &str,
        tokens_before: usize,
        tokens_after: usize,
        target_tokens: usize,
        results: Vec<ResultReport>,
    ) -> Self {
        CompactionReport {
            strategy: strategy.to_owned(),
            tokens_before,
            tokens_after,
            estimated_tokens_after: tokens_after,
            target_tokens,
            target_reached: tokens_after <= target_tokens,
            results,
            inputs_cleared: Vec::new(),
            removed: Vec::new(),
            inserted: Vec::new(),
            stages: Vec::new(),
            failure: None,
        }
    }

    /// This report with `tokens_after` counted: the estimate it held stays in
    /// `estimated_tokens_after`, and `target_reached` follows the count.
    #[must_use]
    pub fn counted(mut self, tokens_after: usize) -> Self {
        self.tokens_after = tokens_after;
        self.target_reached = tokens_after <= self.target_tokens;
        self
    }

    /// The tool names of the rewritten results, oldest first.
    pub fn tool_names(&self) -> Vec<&str> {
        self.results.iter().map(|r| r.tool_name.as_str()).collect()
    }

    /// The indices of the rewritten messages, oldest first, each once.
    pub fn changed_indices(&self) -> Vec<usize> {
        let mut indices: Vec<usize> = self.results.iter().map(|r| r.index).collect();
        indices.dedup();
        indices
    }

    /// The first message (an index into the conversation the compactor was given) that the
    /// compaction changed: a rewritten result, a cleared input, a removed or an inserted
    /// message; `None` when it changed none. Every message before it is sent as it was, so a
    /// provider's prompt cache can still serve them. A chain's stages each describe the
    /// conversation their stage was given, whose messages before its own first change are the
    /// original's, so the smallest over the stages holds.
    pub fn first_changed(&self) -> Option<usize> {
        let own = self
            .results
            .iter()
            .map(|r| r.index)
            .chain(self.inputs_cleared.iter().map(|i| i.index))
            .chain(self.removed.first().copied())
            .chain(self.inserted.first().copied());
        own.chain(self.stages.iter().filter_map(CompactionReport::first_changed)).min()
    }

    /// Tokens freed in all: by rewritten results and cleared inputs together (each message
    /// counted on its own, as the estimate goes) when there are any, otherwise (strategies that
    /// remove or merge messages, chains) the drop from `tokens_before` to `tokens_after`.
    pub fn tokens_freed(&self) -> usize {
        if self.results.is_empty() && self.inputs_cleared.is_empty() {
            return self.tokens_before.saturating_sub(self.tokens_after);
        }
        self.results.iter().map(|r| r.tokens_freed).sum::<usize>()
            + self.inputs_cleared.iter().map(|r| r.tokens_freed).sum::<usize>()
    }
}
