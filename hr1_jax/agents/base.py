"""What a target agent is: one call, messages + tools -> assistant message (OpenAI format)."""
from __future__ import annotations

from typing import Protocol


class TargetAgent(Protocol):
    name: str

    def chat(self, messages: list[dict], tools: list[dict]) -> dict:
        """Return an OpenAI-format assistant message: {"role": "assistant", "content": str | None,
        "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": json-str}}]}.
        May include "usage" (token counts) and "repaired_tool_calls" (int)."""


class AgentError(RuntimeError):
    """The target could not answer (endpoint dead, timeouts exhausted): an infrastructure failure,
    never to be scored as a task failure."""
