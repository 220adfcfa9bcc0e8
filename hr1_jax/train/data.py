"""grain pipelines for training: RL prompt groups, bucketed SFT batches, the GRPO rollout buffer;
and `render_prompt`, the one prompt renderer of SFT, GRPO and eval.

All three are `grain.MapDataset`s (deterministic, random access) turned into iterators whose
`get_state()` is a small JSON-able dict, stored in every checkpoint so a resumed run sees exactly
the data an uninterrupted run would have seen.
"""
from __future__ import annotations

import json
import random
from typing import Callable, Sequence

import grain
import numpy as np

from hr1_jax.data.rows import benchmark_groups
from hr1_jax.models.tokenizer import IM_END, IM_START, THINK_OPEN, Tokenizer

ASSISTANT_OPEN = f"{IM_START}assistant\n"
PREFILL = f"{THINK_OPEN}\n"     # the prefill protocol: the engineer continues an opened think block


def row_benchmark(row: dict) -> str:
    meta = row.get("metadata") or {}
    if isinstance(meta, str):
        meta = json.loads(meta)
    bench = meta.get("benchmark")
    if not bench:
        raise ValueError("row metadata has no 'benchmark'")
    return bench


# ---------------------------------------------------------------------------------------- RL rows

def make_groups(rows: Sequence[dict], group_size: int, seed: int) -> list[list[int]]:
    """GRPO's prompt groups: row indices in `benchmark_groups` of `group_size` rows (a short tail
    padded with duplicates of the same benchmark, so no row is dropped), benchmark number k of the
    sorted ones seeded with seed * 1000 + k."""
    groups = benchmark_groups([row_benchmark(r) for r in rows], group_size,
                              lambda bench, position: random.Random(seed * 1000 + position))
    return [list(g.members) for g in groups]


def rl_group_dataset(rows: Sequence[dict], group_size: int, seed: int) -> grain.MapDataset:
    """Infinite stream of prompt groups (lists of rows); shuffled at group level per epoch."""
    groups = make_groups(rows, group_size, seed)
    return (grain.MapDataset.source(groups).shuffle(seed=seed).repeat(None)
            .map(lambda g: [rows[i] for i in g]))


# ------------------------------------------------------------------------------------------ prompts

def render_prompt(tokenizer: Tokenizer, messages: Sequence[dict]) -> list[int]:
    """Prompt token ids for SFT, GRPO and eval alike, so the engineer is trained on exactly the
    tokens it is sampled on: the tokenizer's chat template (`format_chat` when it has none) with the
    assistant turn opened and `<think>\\n` pre-filled.

    Qwen3.5's template (and `format_chat`) open the think block themselves; Qwen3's leaves it to the
    model, so it is appended here. Any other opening of the assistant turn is an error.
    """
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, enable_thinking=True)
    head, opened, rest = text.rpartition(ASSISTANT_OPEN)
    if not opened or rest not in ("", PREFILL):
        raise ValueError(f"chat template of {tokenizer.source} ends the prompt with {text[-60:]!r}; the prefill "
                         f"protocol needs it to end with {ASSISTANT_OPEN!r}, optionally followed by {PREFILL!r}")
    return tokenizer.encode(head + ASSISTANT_OPEN + PREFILL)


def prompt_ids(tokenizer: Tokenizer, row: dict) -> list[int]:
    """An RL row's prompt tokens, rendered exactly as SFT renders its rows (`render_prompt`)."""
    return render_prompt(tokenizer, row["prompt"])


# --------------------------------------------------------------------------------------- SFT rows

def sft_example(messages: Sequence[dict], tokenizer: Tokenizer) -> dict:
    """Token ids of prompt + assistant continuation, and which targets are trained on.

    The prompt is `render_prompt` of the messages before the assistant's (ending in the pre-filled
    `<think>\\n`); the continuation is the assistant text (reasoning, `</think>`, the patch) plus
    `<|im_end|>`.
    """
    if len(messages) < 2 or messages[-1].get("role") != "assistant":
        raise ValueError("SFT row needs [system?, user, assistant] messages ending with the assistant")
    prompt = render_prompt(tokenizer, messages[:-1])
    target = messages[-1]["content"]
    if target.lstrip().startswith("<think>"):
        raise ValueError("assistant content must not reopen <think> (prefill protocol)")
    cont = tokenizer.encode(target + IM_END)
    return {"ids": np.asarray(prompt + cont, np.int32), "n_prompt": len(prompt)}


def bucket_length(n: int, buckets: Sequence[int]) -> int | None:
    for b in sorted(buckets):
        if n <= b:
            return b
    return None


def pad_batch(examples: Sequence[dict], length: int, pad_id: int, rows: int | None = None) -> dict:
    """Right-pad to `length`; `loss_mask[t]` marks target `ids[t+1]` in the continuation (or, for an
    example with a `token_mask`, wherever that mask marks `ids[t+1]`).

    `rows` > len(examples) appends all-pad rows with an all-zero mask (keeps shapes static).
    """
    rows = rows or len(examples)
    ids = np.full((rows, length), pad_id, np.int32)
    attn = np.zeros((rows, length), np.int32)
    mask = np.zeros((rows, length - 1), np.float32)
    for r, ex in enumerate(examples):
        n = len(ex["ids"])
        ids[r, :n] = ex["ids"]
        attn[r, :n] = 1
        if "token_mask" in ex:   # multi-turn (agent SFT): 1 on every trained token of the sequence
            mask[r, :n - 1] = ex["token_mask"][1:n]
        else:
            mask[r, ex["n_prompt"] - 1:n - 1] = 1.0
    return {"input_ids": ids, "attention_mask": attn, "loss_mask": mask}


def sft_dataset(examples: Sequence[dict], *, batch_size: int, buckets: Sequence[int], pad_id: int,
                seed: int, epochs: int) -> tuple[grain.MapDataset, int]:
    """Bucketed SFT batches: each batch holds examples of one length bucket, padded to it.

    Few distinct shapes = few compilations; padding waste stays small. Examples longer than the
    largest bucket are dropped (the caller logs how many). Returns (dataset of batches, #dropped).
    """
    by_bucket: dict[int, list[int]] = {}
    dropped = 0
    for i, ex in enumerate(examples):
        b = bucket_length(len(ex["ids"]), buckets)
        if b is None:
            dropped += 1
        else:
            by_bucket.setdefault(b, []).append(i)
    plan: list[tuple[int, list[int]]] = []
    for epoch in range(epochs):
        rng = random.Random(seed + epoch)
        for b in sorted(by_bucket):
            idx = list(by_bucket[b])
            rng.shuffle(idx)
            plan += [(b, idx[s:s + batch_size]) for s in range(0, len(idx), batch_size)]
    # Shuffle batches within each epoch only, so epochs stay in order.
    per_epoch = len(plan) // max(epochs, 1)
    ordered = []
    for epoch in range(epochs):
        chunk = plan[epoch * per_epoch:(epoch + 1) * per_epoch]
        random.Random(seed * 7919 + epoch).shuffle(chunk)
        ordered += chunk
    ds = grain.MapDataset.source(ordered).map(
        lambda p: pad_batch([examples[i] for i in p[1]], p[0], pad_id, rows=batch_size))
    return ds, dropped


# ---------------------------------------------------------------------------------- rollout buffer

def buffer_dataset(samples: Sequence[dict], *, minibatch: int, seed: int, collate: Callable,
                   process_index: int = 0, process_count: int = 1) -> grain.MapDataset:
    """The rewarded samples of one GRPO step as shuffled minibatches for the update iterations.

    Each process takes every `process_count`-th sample of the shuffled order (per-host shard), then
    batches `minibatch // process_count` of them; `collate` turns a list of samples into arrays.
    """
    if minibatch % process_count:
        raise ValueError(f"minibatch {minibatch} not divisible by {process_count} processes")
    local = minibatch // process_count
    ds = grain.MapDataset.source(list(samples)).shuffle(seed=seed)
    ds = ds[process_index::process_count]
    return ds.batch(local, drop_remainder=True, batch_fn=collate)
