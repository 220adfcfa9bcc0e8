"""Prompt assembly for RL / SFT / eval rows (spec §1.5): `[system, user]` where
user = the static prefix from the patch package (scope, prefill sentence, schema prompt, DBBench
runtime context, ending with the evidence marker) + the batch's packet. SFT, RL and eval must use
the same system prompt, prefix, schema style and protocol, so all three build prompts here."""
from __future__ import annotations

from hr1_jax.patch import EVIDENCE_MARKER, system_prompt, user_prompt_prefix


def default_schema_style(benchmark: str) -> str:
    return f"{benchmark}_life_multihook_v1"


def build_prompt(benchmark: str, packet: str, *, protocol: str, schema_style: str = "") -> list[dict]:
    style = schema_style or default_schema_style(benchmark)
    prefix = user_prompt_prefix(benchmark, protocol, style).rstrip()
    if not prefix.endswith(EVIDENCE_MARKER):
        prefix = f"{prefix}\n\n{EVIDENCE_MARKER}"
    return [{"role": "system", "content": system_prompt(benchmark, protocol)},
            {"role": "user", "content": f"{prefix}\n\n{packet.strip()}"}]
