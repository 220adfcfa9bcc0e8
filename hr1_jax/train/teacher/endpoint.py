"""An OpenAI-compatible teacher endpoint (the reference's frontier-model teacher, spec §1.7).

The request pre-fills the assistant turn with `<think>\\n` (`continue_final_message`, thinking on),
temperature 0; when the server returns `reasoning_content` separately the text used is
reasoning + `\\n</think>\\n` + content. Bounded retries with exponential back-off; a teacher that
keeps failing yields no candidate for that row (logged), never a crash.
"""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

from hr1_jax.utils.logging import log_event


class EndpointTeacher:
    name = "endpoint"

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY",
                 max_tokens: int = 12288, temperature: float = 0.0, timeout_s: float = 600.0, retries: int = 3):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.max_tokens, self.temperature = model, max_tokens, temperature
        self.timeout_s, self.retries = timeout_s, retries
        self.api_key = os.environ.get(api_key_env, "")

    def complete(self, prompt: list[dict]) -> str | None:
        body = {"model": self.model, "messages": list(prompt) + [{"role": "assistant", "content": "<think>\n"}],
                "max_tokens": self.max_tokens, "temperature": self.temperature, "top_p": 1.0,
                "continue_final_message": True, "add_generation_prompt": False,
                "chat_template_kwargs": {"enable_thinking": True}}
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        for attempt in range(self.retries + 1):
            try:
                req = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers)
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    msg = json.loads(resp.read())["choices"][0]["message"]
                reasoning, content = msg.get("reasoning_content"), msg.get("content") or ""
                text = f"{reasoning}\n</think>\n{content}" if reasoning else content
                # the continuation after the pre-filled "<think>\n" (prefill protocol)
                return text[len("<think>"):].lstrip("\n") if text.lstrip().startswith("<think>") else text
            except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError) as e:
                log_event("teacher", "endpoint_error", attempt=attempt, error=str(e)[:300])
                if attempt < self.retries:
                    time.sleep(min(30.0, 2.0 ** attempt))
        return None

    def responses(self, row: dict) -> list[tuple[str, str]]:
        text = self.complete(row["prompt"])
        return [] if text is None else [("endpoint", text)]
