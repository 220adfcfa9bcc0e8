"""Prompt assembly for RL / SFT / eval rows (spec §1.5): `[system, user]` where
user = the static prefix from the patch package (scope, prefill sentence, schema prompt, DBBench
runtime context, ending with the evidence marker) + the batch's packet. SFT, RL and eval must use
the same system prompt, prefix, schema style and protocol, so all three build prompts here."""
from __future__ import annotations

from hr1_jax.patch import EVIDENCE_MARKER, system_prompt, user_prompt_prefix
from hr1_jax.patch import schema_style as own_schema_style


def build_prompt(benchmark: str, packet: str, *, protocol: str, schema_style: str = "") -> list[dict]:
    """`schema_style` "" = the benchmark's own (`hr1_jax.patch.schema_style`)."""
    style = schema_style or own_schema_style(benchmark)
    prefix = user_prompt_prefix(benchmark, protocol, style).rstrip()
    if not prefix.endswith(EVIDENCE_MARKER):
        prefix = f"{prefix}\n\n{EVIDENCE_MARKER}"
    return [{"role": "system", "content": system_prompt(benchmark, protocol)},
            {"role": "user", "content": f"{prefix}\n\n{packet.strip()}"}]
