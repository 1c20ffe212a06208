//! [`AgentState`]: what an agent loop owns and the hooks read and rewrite.

use compaction_model::{Message, ToolSpec};

/// The part of an agent run the hooks need: the conversation, the provider's last token count,
/// the tool schemas sent with each request, and the step count.
///
/// It is plain data, so any framework can fill it from its own types. The messages sit behind
/// accessors ([`AgentState::messages`], [`AgentState::push`], [`AgentState::extend`],
/// [`AgentState::messages_mut`], [`AgentState::set_messages`]) rather than in a public field:
/// every change goes through a method, which leaves room to keep per-message token counts valid
/// as the conversation grows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentState {
    messages: Vec<Message>,
    /// The provider's token count of the last request plus its reply; 0 when unknown (nothing
    /// sent yet, or a provider that reports no usage).
    pub context_tokens: usize,
    /// The tool schemas sent with each request.
    pub tools: Vec<ToolSpec>,
    /// How many agent steps have run.
    pub step_count: usize,
}

impl AgentState {
    /// A state holding `messages`, with no provider count, no tools and step 0.
    pub fn new(messages: Vec<Message>) -> Self {
        AgentState { messages, ..AgentState::default() }
    }

    /// The same state with `tools`.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// The same state with the provider's count `context_tokens`.
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

    /// The conversation, for changes in place.
    pub fn messages_mut(&mut self) -> &mut Vec<Message> {
        &mut self.messages
    }

    /// Replaces the whole conversation.
    pub fn set_messages(&mut self, messages: Vec<Message>) {
        self.messages = messages;
    }

    /// The conversation, taken out of the state.
    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }
}
