//! rig-agent's `AgentHook`, compacting the history of every model call of a run.

use rig_agent::agent::{CompletionCallAction, CompletionCallEvent, RequestPatch};
use rig_agent::{AgentHook, HookContext};

use super::CompactionPolicy;

/// A rig agent hook that compacts the history sent with each model call — between the tool
/// turns of one prompt too, where a memory policy (which shapes history only when a prompt
/// loads it) does not reach.
///
/// Before every model call it hands rig's history to its [`CompactionPolicy`]; when that
/// compacts, the call goes out with the compacted history (a per-call `RequestPatch`: the run
/// and the memory keep every message). A history the conversion back to rig would lose
/// something of stops the run with the reason, rather than go out short.
///
/// `AgentBuilder::new(model).add_hook(CompactionAgentHook::pruning(30_000))` — see
/// `examples/rig_agent.rs`.
#[derive(Debug)]
pub struct CompactionAgentHook {
    policy: CompactionPolicy,
}

impl CompactionAgentHook {
    /// A hook that compacts with `policy`.
    pub fn new(policy: CompactionPolicy) -> Self {
        CompactionAgentHook { policy }
    }

    /// A hook that prunes old tool results down to `target_tokens` (see
    /// [`CompactionPolicy::pruning`]).
    pub fn pruning(target_tokens: usize) -> Self {
        Self::new(CompactionPolicy::pruning(target_tokens))
    }

    /// The policy it compacts with (and its last report).
    pub fn policy(&self) -> &CompactionPolicy {
        &self.policy
    }
}

impl AgentHook for CompactionAgentHook {
    fn name(&self) -> Option<String> {
        Some(format!("compaction ({})", self.policy.name()))
    }

    async fn on_completion_call(
        &self,
        _ctx: &HookContext,
        event: CompletionCallEvent<'_>,
    ) -> CompletionCallAction {
        match self.policy.compact(event.history) {
            Ok(Some(history)) => CompletionCallAction::patch(RequestPatch::new().history(history)),
            Ok(None) => CompletionCallAction::continue_run(),
            Err(reason) => CompletionCallAction::stop(reason),
        }
    }
}
