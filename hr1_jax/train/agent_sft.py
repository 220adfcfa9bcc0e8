"""`hr1 agent-sft`: supervised fine-tuning of the TARGET on its own successful trajectories (spec §7).

stored baselines (config.train.agent_sft.baseline_dir) -> agent-SFT rows (`data.agent_rows`: successful,
no-intervention, deduplicated per task) -> WORKDIR/rows/agent_sft_rows.jsonl -> each conversation
rendered through the tokenizer's chat template with its tool schema, thinking off, loss on every
assistant turn and its tool calls (`render_conversation`) -> the engineer-SFT trainer (mesh, AdamW
schedule, checkpoints and resume, TensorBoard; config.train.sft) -> WORKDIR/final_params, which
`hr1 serve` serves. With `train_tokenizer_vocab` > 0 (the CPU demo) a SentencePiece tokenizer is
first trained on the rendered rows.
"""
from __future__ import annotations

import copy
import json
import os

import ml_collections
import numpy as np

from hr1_jax.config import ConfigError
from hr1_jax.data.agent_rows import build_agent_rows
from hr1_jax.data.rows import read_jsonl, write_jsonl
from hr1_jax.errors import InputError
from hr1_jax.models.tokenizer import IM_END, SPECIAL_TOKENS, format_chat, render_conversation, train_sentencepiece
from hr1_jax.utils.jsonsafe import write_json


def agent_sft_defaults() -> ml_collections.ConfigDict:
    """`config.train.agent_sft` (the SFT hyper-parameters themselves are config.train.sft)."""
    c = ml_collections.ConfigDict()
    c.baseline_dir = ""              # stored baselines; "" = WORKDIR/baseline (`hr1 baseline` layout)
    c.rows = ""                      # ready agent-SFT rows JSONL instead (skips building them)
    c.benchmarks = ()                # () = every benchmark found
    c.splits = ()                    # the SFT split(s) of the baselines; () = all
    c.enable_thinking = False        # reference: template qwen3_5_text_nothink
    c.train_tokenizer_vocab = 0      # > 0: train a SentencePiece of this size on the rows (tiny CPU target)
    return c


def _section(config):
    if "agent_sft" not in config.train:
        raise ConfigError("train.agent_sft", "missing: start the config from agent_sft_defaults() "
                                             "(see configs/agent_sft_demo.py)")
    return config.train.agent_sft


def _tool_specs(config):
    from envs.registry import make_env

    return lambda bench: make_env(bench, config).tool_specs()


def agent_rows(config, workdir: str) -> tuple[list[dict], dict]:
    """The rows to train on: config.train.agent_sft.rows, or built from the stored baselines."""
    a = _section(config)
    if a.rows:
        return read_jsonl(a.rows), {"rows": None, "source": a.rows}
    root = a.baseline_dir or os.path.join(workdir, "baseline")
    if not os.path.isdir(root):
        raise InputError(f"no baselines under {root}: run `hr1 baseline` first or set "
                         "config.train.agent_sft.baseline_dir")
    rows, stats = build_agent_rows(root, _tool_specs(config), threshold=float(config.rollout.reward_threshold),
                                   benchmarks=tuple(a.benchmarks) or None, splits=tuple(a.splits) or None)
    if not rows:
        raise InputError(f"no successful no-intervention trajectories under {root} ({stats})")
    write_jsonl(os.path.join(workdir, "rows", "agent_sft_rows.jsonl"), rows)
    write_json(os.path.join(workdir, "rows", "agent_sft_stats.json"), stats)
    return rows, dict(stats, source=root)


def conversation_example(row: dict, tokenizer, enable_thinking: bool = False) -> dict:
    """ids and a per-token mask (1 on assistant turns) of one agent-SFT row."""
    ids, mask = render_conversation(tokenizer, row["messages"], row.get("tools") or None, enable_thinking)
    if not any(mask):
        raise ValueError("agent-SFT row has no assistant turn to train on")
    return {"ids": np.asarray(ids, np.int32), "token_mask": np.asarray(mask, np.float32)}


def _train_tokenizer(rows: list[dict], workdir: str, vocab: int, enable_thinking: bool) -> str:
    """A SentencePiece on the rendered rows; each distinct system-prompt / tool-schema line is one piece
    (a demo concession like train/compact.py: a tiny model reads the fixed scaffolding as a few tokens)."""
    prefix = os.path.join(workdir, "tokenizer", "target_spm")
    if os.path.isfile(prefix + ".model"):   # a resumed run keeps the tokenizer its checkpoints were trained with
        return prefix + ".model"
    texts = [format_chat(r["messages"], False, enable_thinking, r.get("tools") or None) for r in rows]
    fixed = {line for t in texts for line in t.split(IM_END, 1)[0].split("\n")
             if len(line) > 3 and line not in SPECIAL_TOKENS}
    symbols = sorted(fixed, key=len, reverse=True)[:400] + _call_openings(rows)
    train_sentencepiece(texts, prefix, vocab, extra_symbols=[s.replace(" ", "\u2581") for s in symbols])
    return prefix + ".model"


def _call_openings(rows: list[dict]) -> list[str]:
    """`{"name": "TOOL", "arguments": {"PARAM": ` of every tool parameter: one piece per tool call opening."""
    out = {f'{{"name": "{t["function"]["name"]}", "arguments": {{"{p}": '
           for r in rows for t in r.get("tools") or [] for p in (t["function"].get("parameters") or {}).get("properties", {})}
    return sorted(out)


def run_agent_sft(config, workdir: str) -> dict:
    from hr1_jax.train.engine import Engineer
    from hr1_jax.train.sft import fit

    a = _section(config)
    rows, row_stats = agent_rows(config, workdir)
    if a.train_tokenizer_vocab > 0 and not config.model.tokenizer:
        config = copy.deepcopy(config)
        with config.unlocked():
            config.model.tokenizer = _train_tokenizer(rows, workdir, int(a.train_tokenizer_vocab), a.enable_thinking)
    eng = Engineer(config, stage="agent_sft")
    summary = fit(config, workdir, eng, rows, lambda r: conversation_example(r, eng.tokenizer, a.enable_thinking),
                  stage="agent_sft")
    return dict(summary, data=row_stats, tokenizer=eng.tokenizer.source)


def agent_sft_stage(config, workdir: str) -> int:
    """Agent SFT of the target (config.model; config.train.init_checkpoint to start from a checkpoint,
    e.g. the target's HF folder) on its successful no-intervention baseline trajectories
    (config.train.agent_sft.baseline_dir, default WORKDIR/baseline from `hr1 baseline`; or ready rows
    in config.train.agent_sft.rows) with config.train.sft -> WORKDIR/rows/agent_sft_rows.jsonl,
    orbax checkpoints (a rerun resumes), WORKDIR/final_params (serve it with `hr1 serve`),
    WORKDIR/agent_sft_summary.json."""
    summary = run_agent_sft(config, workdir)
    write_json(os.path.join(workdir, "agent_sft_summary.json"), summary)
    print(json.dumps(summary, indent=1))
    return 0
