//! [`TokenBudgetHook`]: stops an agent run once its cumulative token usage reaches a budget.

use compaction_core::{InitParameters, IntegerSetting};
use compaction_model::Message;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::Error;
use crate::state::AgentState;
use crate::usage::total_tokens;

/// The class path Haystack writes as `type` in `TokenBudgetHook.to_dict()`.
pub const HAYSTACK_BUDGET_HOOK_TYPE: &str = "haystack.hooks.budget.hooks.TokenBudgetHook";

/// The reason [`TokenBudgetHook`] puts in [`AgentState::stop_run`]: the run's exit reason.
pub const TOKEN_BUDGET_EXCEEDED: &str = "token_budget_exceeded";

/// The assistant message [`TokenBudgetHook`] appends when `add_final_message` is on.
///
/// Data, kept in sync with Haystack 3.4.1, `haystack/hooks/budget/hooks.py`
/// (`_FINAL_MESSAGE_TEXT`).
pub const BUDGET_FINAL_MESSAGE: &str = "The Agent stopped because the token budget was exceeded.";

/// What one [`TokenBudgetHook::run`] read and did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[must_use]
#[non_exhaustive]
pub struct BudgetOutcome {
    /// The run's usage so far, as read from [`AgentState::token_usage`]: `total_tokens`, or
    /// input plus output tokens when that is missing or 0.
    pub total_tokens: i128,
    /// Whether it reached the budget, so the hook asked the run to stop.
    pub exceeded: bool,
    /// Whether the hook appended [`BUDGET_FINAL_MESSAGE`].
    pub final_message_added: bool,
}

/// Stops an agent run when its cumulative token usage reaches a budget, as Haystack's
/// `TokenBudgetHook` does.
///
/// Run it before each model call. It reads the usage the agent loop recorded in
/// [`AgentState::token_usage`] (see [`AgentState::record_usage`]), and once it reaches
/// `max_total_tokens` it sets [`AgentState::stop_run`] to [`TOKEN_BUDGET_EXCEEDED`] — the loop
/// checks it and ends the run before spending another call — and, with `add_final_message`,
/// appends an assistant message saying why. Only the model calls the loop records count; calls
/// made by tools or other hooks (a summarizer) do not, unless the loop records them too.
///
/// ```
/// use compaction_hook::{AgentState, TokenBudgetHook, TOKEN_BUDGET_EXCEEDED};
/// use compaction_model::Message;
///
/// let hook = TokenBudgetHook::new(1_000)?.with_final_message(true);
/// let mut state = AgentState::new(vec![Message::user("Research this.")]);
/// let usage = serde_json::json!({"usage": {"prompt_tokens": 800, "completion_tokens": 300}});
/// state.record_usage(&[Message::assistant("…").with_meta(usage.as_object().unwrap().clone())]);
///
/// let outcome = hook.run(&mut state);
/// assert_eq!(outcome.total_tokens, 1_100);
/// assert_eq!(state.stop_run.as_deref(), Some(TOKEN_BUDGET_EXCEEDED));
/// assert_eq!(state.messages().len(), 2);
/// # Ok::<(), compaction_hook::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenBudgetHook {
    max_total_tokens: usize,
    add_final_message: bool,
}

impl TokenBudgetHook {
    /// A hook stopping the run at `max_total_tokens` (at least 1), without a final message.
    ///
    /// # Errors
    ///
    /// When `max_total_tokens` is 0.
    pub fn new(max_total_tokens: usize) -> Result<Self, Error> {
        if max_total_tokens < 1 {
            return Err(Error::BudgetTooSmall(0));
        }
        Ok(TokenBudgetHook { max_total_tokens, add_final_message: false })
    }

    /// The same hook appending, or not, an assistant message that says why the run stopped.
    #[must_use]
    pub fn with_final_message(mut self, add_final_message: bool) -> Self {
        self.add_final_message = add_final_message;
        self
    }

    /// The budget.
    pub fn max_total_tokens(&self) -> usize {
        self.max_total_tokens
    }

    /// Whether a final message is appended.
    pub fn add_final_message(&self) -> bool {
        self.add_final_message
    }

    /// Reads a hook from `{"max_total_tokens", "add_final_message"}` or Haystack's `to_dict` form.
    ///
    /// # Errors
    ///
    /// For a missing or invalid `max_total_tokens`, a key the hook does not take, a value of the
    /// wrong kind, or a `type` other than the hook's.
    pub fn from_value(value: &Value) -> Result<Self, Error> {
        let params = InitParameters::read(
            value,
            HAYSTACK_BUDGET_HOOK_TYPE,
            &["max_total_tokens", "add_final_message"],
        )?;
        let budget = match params.integer("max_total_tokens")? {
            None => return Err(InitParameters::missing("max_total_tokens").into()),
            Some(IntegerSetting::NonNegative(n)) => n,
            Some(IntegerSetting::Negative(n)) => return Err(Error::BudgetTooSmall(n)),
        };
        let hook = TokenBudgetHook::new(budget)?;
        Ok(hook.with_final_message(params.boolean("add_final_message")?.unwrap_or(false)))
    }

    /// The hook in Haystack's `to_dict` form.
    pub fn to_haystack_value(&self) -> Value {
        let mut params = Map::new();
        params.insert("max_total_tokens".into(), Value::from(self.max_total_tokens));
        params.insert("add_final_message".into(), Value::Bool(self.add_final_message));
        let mut dict = Map::new();
        dict.insert("type".into(), Value::String(HAYSTACK_BUDGET_HOOK_TYPE.into()));
        dict.insert("init_parameters".into(), Value::Object(params));
        Value::Object(dict)
    }

    /// Asks the run to stop if its usage reached the budget, and says what it read.
    pub fn run(&self, state: &mut AgentState) -> BudgetOutcome {
        let total = total_tokens(&state.token_usage);
        let exceeded = total >= self.max_total_tokens as i128;
        if exceeded {
            tracing::warn!(
                max_total_tokens = self.max_total_tokens,
                total_tokens = %total,
                "the agent reached its token budget; requesting a stop"
            );
            state.stop_run = Some(TOKEN_BUDGET_EXCEEDED.to_owned());
            if self.add_final_message {
                state.push(Message::assistant(BUDGET_FINAL_MESSAGE));
            }
        }
        BudgetOutcome {
            total_tokens: total,
            exceeded,
            final_message_added: exceeded && self.add_final_message,
        }
    }
}
