"""Haystack's `TokenBudgetHook`: stops an Agent run once its token usage reaches a budget.

Plain Python, on purpose: the hook reads two or three numbers from the state's `token_usage` and
compares them with the budget, which costs less than a call into Rust would. It reads them as
compaction-hook's `TokenBudgetHook` does (`total_tokens`, else input plus output tokens under
either provider's names; booleans are not counts).
"""

from __future__ import annotations

from typing import Any

from haystack import logging
from haystack.components.agents.state.state import State
from haystack.dataclasses import ChatMessage
from haystack.utils.experimental import _experimental

from compaction.haystack._common import HAYSTACK_TYPES, deserialize, serialize

HAYSTACK_TYPES.update({"TokenBudgetHook": "haystack.hooks.budget.hooks.TokenBudgetHook"})

logger = logging.getLogger(__name__)

# The assistant message `add_final_message` appends; data, kept in sync with Haystack 3.4.1
# (`haystack/hooks/budget/hooks.py`) and compaction-hook's `BUDGET_FINAL_MESSAGE`.
_FINAL_MESSAGE_TEXT = "The Agent stopped because the token budget was exceeded."
# The exit reason the Agent reports; compaction-hook's `TOKEN_BUDGET_EXCEEDED`.
_STOP_REASON = "token_budget_exceeded"
# The keys providers report tokens under, in the order they are looked for.
_INPUT_KEYS = ("prompt_tokens", "input_tokens")
_OUTPUT_KEYS = ("completion_tokens", "output_tokens")


def _first_count(usage: dict[str, Any], keys: tuple[str, ...]) -> int:
    """The first number under `keys` (a bool is not one), truncated as `int()` does; 0 when there is none."""
    for value in (usage.get(key) for key in keys):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
    return 0


def _total_tokens(usage: dict[str, Any]) -> int:
    """`total_tokens` when it is there and not 0, else input plus output tokens."""
    total = _first_count(usage, ("total_tokens",))
    return total or _first_count(usage, _INPUT_KEYS) + _first_count(usage, _OUTPUT_KEYS)


@_experimental
class TokenBudgetHook:
    """
    Stop an Agent run when its token usage reaches a configured budget (Haystack's `TokenBudgetHook`).

    A `before_llm` hook: once the cumulative usage in the Agent state (`token_usage`) reaches `max_total_tokens`, it
    asks the run to stop before the next LLM call, with the exit reason `"token_budget_exceeded"`.
    """

    allowed_hook_points = ("before_llm",)

    def __init__(self, *, max_total_tokens: int, add_final_message: bool = False) -> None:
        """
        Create a token budget hook.

        :param max_total_tokens: Maximum cumulative token usage before the Agent is stopped.
        :param add_final_message: Whether to append an assistant message explaining why the Agent stopped.
        :raises ValueError: If `max_total_tokens` is less than 1.
        """
        if max_total_tokens < 1:
            raise ValueError(f"`max_total_tokens` must be a positive number of tokens, got {max_total_tokens}.")
        self.max_total_tokens = max_total_tokens
        self.add_final_message = add_final_message

    def run(self, state: State) -> None:
        """
        Stop the Agent if its cumulative token usage has reached the budget.

        :param state: Agent state containing the cumulative token usage.
        """
        total_tokens = _total_tokens(state.data.get("token_usage") or {})
        if total_tokens < self.max_total_tokens:
            return
        logger.warning(
            "Agent reached its token budget of {max_total_tokens} ({total_tokens} used); requesting a stop.",
            max_total_tokens=self.max_total_tokens,
            total_tokens=total_tokens,
        )
        state.set("stop_run", _STOP_REASON)
        if self.add_final_message:
            state.set("messages", [ChatMessage.from_assistant(_FINAL_MESSAGE_TEXT)])

    def to_dict(self) -> dict[str, Any]:
        """Serialize the hook, as Haystack's does."""
        return serialize(self, max_total_tokens=self.max_total_tokens, add_final_message=self.add_final_message)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenBudgetHook:
        """Deserialize the hook from Haystack's dictionary or ours."""
        return deserialize(cls, data)
