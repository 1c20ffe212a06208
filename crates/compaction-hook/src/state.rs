//! [`AgentState`]: what an agent loop owns and the hooks read and rewrite.

use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use compaction_core::Memo;
use compaction_model::{JsonObject, Message, ToolSpec};
use compaction_tokens::{Counts, RunningCount, TokenCounter};

/// The part of an agent run the hooks need: the conversation, the provider's last token count,
/// the tool schemas sent with each request, and the step count.
///
/// It is plain data, so any framework can fill it from its own types. The messages sit behind
/// accessors ([`AgentState::messages`], [`AgentState::push`], [`AgentState::extend`],
/// [`AgentState::messages_mut`], [`AgentState::set_messages`]) rather than in a public field:
/// every change goes through a method, so the state keeps a running token count that stays
/// valid while the conversation only grows: a hook step that does not compact measures only the
/// messages added since the last step, not the whole conversation.
#[derive(Debug, Default)]
pub struct AgentState {
    messages: Vec<Message>,
    /// The running count of `messages`: told of in-place rewrites, cleared whenever they change
    /// otherwise (other than by appending).
    running: Mutex<RunningCount>,
    /// What each hook's compactor remembers of this conversation, by hook; forgotten as
    /// `running` is.
    memos: Mutex<Vec<(u64, Memo)>>,
    /// The provider's token count of the last request plus its reply; 0 when unknown (nothing
    /// sent yet, or a provider that reports no usage).
    pub context_tokens: usize,
    /// The tool schemas sent with each request.
    pub tools: Vec<ToolSpec>,
    /// How many agent steps have run.
    pub step_count: usize,
    /// The run's token usage so far: every model reply's `meta["usage"]` summed, as the
    /// reference's agent keeps it (see [`AgentState::record_usage`]). Read by the
    /// [`TokenBudgetHook`](crate::TokenBudgetHook).
    pub token_usage: JsonObject,
    /// Set by a hook that asks the run to stop before the next model call, to the reason (the
    /// run's exit reason), such as `token_budget_exceeded`. The agent loop checks it.
    pub stop_run: Option<String>,
    /// How long it has been since the previous model call, when the agent loop knows it: with a
    /// hook's cache-aware rule ([`CacheRule`](crate::CacheRule)), a pause past the cache's
    /// lifetime means the prompt is written to the cache again anyway, so compacting costs
    /// nothing extra. `None` (unknown) is taken as a warm cache.
    pub idle: Option<std::time::Duration>,
}

impl Clone for AgentState {
    fn clone(&self) -> Self {
        AgentState {
            messages: self.messages.clone(),
            running: Mutex::new(self.running().clone()),
            memos: Mutex::new(self.memos().clone()),
            context_tokens: self.context_tokens,
            tools: self.tools.clone(),
            step_count: self.step_count,
            token_usage: self.token_usage.clone(),
            stop_run: self.stop_run.clone(),
            idle: self.idle,
        }
    }
}

impl PartialEq for AgentState {
    /// States are equal when what they hold is; the running count is a cache.
    fn eq(&self, other: &Self) -> bool {
        self.messages == other.messages
            && self.context_tokens == other.context_tokens
            && self.tools == other.tools
            && self.step_count == other.step_count
            && self.token_usage == other.token_usage
            && self.stop_run == other.stop_run
            && self.idle == other.idle
    }
}

impl AgentState {
    /// `counter.count(messages, tools)` of the whole conversation, measuring only the messages
    /// appended since the last call with the same counter.
    pub fn count_with_tools(&self, counter: &dyn TokenCounter) -> usize {
        self.running().count(counter, &self.messages, &self.tools)
    }

    /// `counter.count(&messages[range], tools)`, from the running count.
    pub(crate) fn count_range(
        &self,
        counter: &dyn TokenCounter,
        range: Range<usize>,
        tools: &[ToolSpec],
    ) -> usize {
        self.running().count_range(counter, &self.messages, range, tools)
    }

    /// `counter.try_count_rewritten(&messages[range], rewritten, tools)`, from the running count:
    /// only the rewritten messages are measured.
    pub(crate) fn count_rewritten_range(
        &self,
        counter: &dyn TokenCounter,
        range: Range<usize>,
        rewritten: &[(usize, &Message)],
        tools: &[ToolSpec],
    ) -> usize {
        self.running().count_rewritten_range(counter, &self.messages, range, rewritten, tools)
    }

    /// `counter`, answering from this state's running count whenever it is asked about the
    /// state's own messages (the whole conversation, a stretch of it, one message of it, or the
    /// conversation with a few messages rewritten), and asking `counter` itself about anything
    /// else. Its answers equal `counter`'s.
    ///
    /// Hand it to a compactor run on [`AgentState::messages`] so that the compactor's counts
    /// cost what was appended or rewritten since the last count, not the whole conversation;
    /// the compaction hook does this itself.
    pub fn counting<'a>(&'a self, counter: &'a dyn TokenCounter) -> impl TokenCounter + 'a {
        crate::counting::StateCounter::new(counter, self)
    }

    /// `counter.count_each(&messages[range])`, from the running count.
    pub(crate) fn count_each_range(&self, counter: &dyn TokenCounter, range: Range<usize>) -> Counts {
        self.running().count_each_range(counter, &self.messages, range)
    }

    /// The count of the message at `index` on its own, remembered until it is rewritten.
    pub(crate) fn own_count(&self, counter: &dyn TokenCounter, index: usize) -> usize {
        self.running().own(counter, &self.messages, index)
    }

    /// What the compactor of hook `hook` remembered of this conversation (a fresh memo the
    /// first time); give it back with [`AgentState::keep_memo`].
    pub(crate) fn take_memo(&self, hook: u64) -> Memo {
        let mut memos = self.memos();
        match memos.iter().position(|(id, _)| *id == hook) {
            Some(at) => memos.swap_remove(at).1,
            None => Memo::default(),
        }
    }

    /// Keeps `memo` for hook `hook`.
    pub(crate) fn keep_memo(&self, hook: u64, memo: Memo) {
        self.memos().push((hook, memo));
    }

    // The caches hold nothing a panic could leave half-changed that a recount would not mend:
    // a poisoned lock is still usable.
    fn running(&self) -> MutexGuard<'_, RunningCount> {
        self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn memos(&self) -> MutexGuard<'_, Vec<(u64, Memo)>> {
        self.memos.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// [`AgentState::count_with_tools`] for counters that can fail: a counter whose counts add
    /// up message by message counts only what was appended, any other is asked through
    /// [`TokenCounter::try_count`].
    ///
    /// # Errors
    ///
    /// When the counter cannot count.
    pub fn try_count_with_tools(
        &self,
        counter: &dyn TokenCounter,
    ) -> Result<usize, compaction_tokens::Error> {
        if self.messages.is_empty() || counter.additive().is_some() {
            return Ok(self.count_with_tools(counter));
        }
        counter.try_count(&self.messages, &self.tools)
    }

    /// Records the usage of one model call's replies, as the reference's agent does after every
    /// call: each reply's `meta["usage"]` object is summed into [`AgentState::token_usage`]
    /// (objects key by key, numbers added), and the last reply's input plus output tokens
    /// (`prompt_tokens`/`input_tokens` plus `completion_tokens`/`output_tokens`), when not 0,
    /// become [`AgentState::context_tokens`].
    pub fn record_usage(&mut self, replies: &[Message]) {
        crate::usage::record(&mut self.token_usage, &mut self.context_tokens, replies);
    }

    fn forget_counts(&mut self) {
        self.running().clear();
        self.memos().clear();
    }

    /// Rewrites the conversation with a compaction's edits, in place. Edits that rewrite
    /// messages where they are keep what was counted of the others.
    ///
    /// # Errors
    ///
    /// As [`Compaction::apply`](compaction_core::Compaction::apply): an edit that cannot be
    /// placed in this conversation, which is then left as it was.
    pub fn apply(
        &mut self,
        compaction: compaction_core::Compaction,
    ) -> Result<compaction_core::CompactionReport, compaction_core::Error> {
        compaction.check(&self.messages)?;
        let changes = compaction.changes(&self.messages);
        match changes.changed() {
            Some(indices) => {
                self.running().rewritten(indices);
                for (_, memo) in self.memos().iter_mut() {
                    memo.rewritten(indices.iter().copied());
                }
            }
            None => self.forget_counts(),
        }
        compaction.apply(&mut self.messages)
    }

    /// A state holding `messages`, with no provider count, no tools and step 0.
    pub fn new(messages: Vec<Message>) -> Self {
        AgentState { messages, ..AgentState::default() }
    }

    /// The same state with `tools`.
    #[must_use]
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// The same state with the provider's count `context_tokens`.
    #[must_use]
    pub fn with_context_tokens(mut self, context_tokens: usize) -> Self {
        self.context_tokens = context_tokens;
        self
    }

    /// The conversation, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Appends one message.
    pub fn push(&mut self, message: Message) {
        self.messages.push(message);
    }

    /// Appends messages in order.
    pub fn extend(&mut self, messages: impl IntoIterator<Item = Message>) {
        self.messages.extend(messages);
    }

    /// Replaces messages where they are, each `(index, message)`; an index past the end is
    /// ignored. What was counted of the other messages is kept, so the next count measures only
    /// the replaced ones.
    pub fn replace_messages(&mut self, replacements: impl IntoIterator<Item = (usize, Message)>) {
        let mut replaced = Vec::new();
        for (index, message) in replacements {
            if let Some(slot) = self.messages.get_mut(index) {
                *slot = message;
                replaced.push(index);
            }
        }
        self.running().rewritten(&replaced);
        for (_, memo) in self.memos().iter_mut() {
            memo.rewritten(replaced.iter().copied());
        }
    }

    /// The conversation, for changes in place.
    pub fn messages_mut(&mut self) -> &mut Vec<Message> {
        self.forget_counts();
        &mut self.messages
    }

    /// Replaces the whole conversation.
    pub fn set_messages(&mut self, messages: Vec<Message>) {
        self.forget_counts();
        self.messages = messages;
    }

    /// The conversation, taken out of the state.
    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }
}
