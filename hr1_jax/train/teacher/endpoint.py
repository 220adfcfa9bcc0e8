"""An OpenAI-compatible teacher endpoint (the reference's frontier-model teacher, spec §1.7, §7), on
the project's one client (`agents.openai_client`: pooled HTTP, bounded jittered retries honouring
`Retry-After`, no retry on a final 4xx, a deadline per request).

On a vLLM/SGLang server the assistant turn is pre-filled with `<think>\\n` (`continue_final_message`,
thinking on); a hosted API gets the plain prompt (it rejects those fields). When the server returns
the reasoning separately (`reasoning_content` or `reasoning`) the text is reasoning + `\\n</think>\\n`
+ content. `complete` gives that raw text (eval parses it as the reference did); `responses` gives
the SFT target built from it with the reference's clean-up (`reasoning.sft_target`), and
`responses_many` asks for up to `concurrency` rows at once (the reference ran 8 in flight). A teacher
that keeps failing yields no candidate for that row (logged), never a crash.
"""
from __future__ import annotations

import concurrent.futures
import os

from hr1_jax.agents.base import AgentError
from hr1_jax.agents.openai_client import OpenAIChatClient, reasoning_text
from hr1_jax.train.teacher.reasoning import sft_target
from hr1_jax.utils.logging import log_event
from hr1_jax.utils.progress import progress

PREFILL = {"role": "assistant", "content": "<think>\n"}
PREFILL_FIELDS = {"continue_final_message": True, "add_generation_prompt": False}
MAX_BACKOFF_S = 30.0


def continuation(message: dict) -> str:
    """The reply as the text after the pre-filled `<think>\\n`."""
    reasoning, content = reasoning_text(message), message.get("content") or ""
    text = f"{reasoning}\n</think>\n{content}" if reasoning else content
    return text[len("<think>"):].lstrip("\n") if text.lstrip().startswith("<think>") else text


class EndpointTeacher:
    name = "endpoint"

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY",
                 max_tokens: int = 12288, temperature: float = 0.0, timeout_s: float = 600.0, retries: int = 3,
                 concurrency: int = 8, vllm_fields: bool | None = None,
                 token_limit_field: str = "max_completion_tokens", omit_fields="", top_p: float | None = 1.0):
        self.concurrency = max(1, int(concurrency))
        self.client = OpenAIChatClient(
            base_url, model, name=f"teacher:{model}", api_key=os.environ.get(api_key_env or "", ""),
            temperature=temperature, max_tokens=max_tokens, top_p=top_p, timeout_s=timeout_s,
            retry_budget_s=(retries + 1) * timeout_s + retries * MAX_BACKOFF_S, max_retries=retries,
            max_backoff_s=MAX_BACKOFF_S, concurrency=self.concurrency, enable_thinking=True,
            vllm_fields=vllm_fields, token_limit_field=token_limit_field, omit_fields=omit_fields)

    @classmethod
    def from_config(cls, section) -> "EndpointTeacher":
        """From `config.train.teacher`."""
        return cls(section.base_url, section.model, api_key_env=section.api_key_env,
                   max_tokens=section.max_tokens, temperature=section.temperature, timeout_s=section.timeout_s,
                   retries=section.retries, concurrency=section.concurrency, vllm_fields=section.vllm_fields,
                   token_limit_field=section.token_limit_field, omit_fields=section.omit_fields)

    def complete(self, prompt: list[dict]) -> str | None:
        """The teacher's raw text for one prompt, or None when the endpoint kept failing."""
        try:
            prefill = self.client.takes_vllm_fields()
            body = self.client.body((list(prompt) + [PREFILL]) if prefill else list(prompt),
                                    vllm_extra=PREFILL_FIELDS)
            message = self.client.complete(body)["choices"][0]["message"]
        except AgentError as e:
            log_event("teacher", "endpoint_error", error=str(e)[:300])
            return None
        return continuation(message)

    def responses(self, row: dict) -> list[tuple[str, str]]:
        text = self.complete(row["prompt"])
        if text is None:
            return []
        protocol = (row.get("metadata") or {}).get("response_protocol") or "prefill_think_patch"
        return [("endpoint", sft_target(text, protocol))]

    def responses_many(self, rows: list[dict]) -> list[list[tuple[str, str]]]:
        """`responses` of every row, `concurrency` requests in flight, in row order."""
        with concurrent.futures.ThreadPoolExecutor(self.concurrency, thread_name_prefix="hr1-teacher") as pool:
            return list(progress(pool.map(self.responses, rows), total=len(rows),
                                 desc="teacher: write candidates", unit="row"))
