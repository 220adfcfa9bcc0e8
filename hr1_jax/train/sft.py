"""`hr1 sft`: cold-start supervised fine-tuning of the engineer on SFT rows (reference §7).

SFT rows -> token ids (prefill protocol: loss on the assistant continuation only) -> bucketed grain
batches -> jitted sharded step (AdamW, warm-up + cosine, clip 1.0, gradient accumulation) ->
TensorBoard scalars, async orbax checkpoints (state + data position), resume, final params + HF export.
"""
from __future__ import annotations

import os
import time

import jax
import numpy as np

from hr1_jax.data.rows import read_jsonl
from hr1_jax.train.checkpoint import Checkpointer, abstract_like
from hr1_jax.train.data import sft_dataset, sft_example
from hr1_jax.train.engine import Engineer
from hr1_jax.train.sft_step import make_sft_step, sft_optimizer
from hr1_jax.train.state import warmup_cosine
from hr1_jax.train.step import jit_step, to_global
from hr1_jax.utils.logging import log_event
from hr1_jax.utils.progress import progress
from hr1_jax.utils.tensorboard import TensorBoardWriter


def _accum(batch: dict, accum: int) -> dict:
    """Global [A*M, ...] -> this host's rows [A, M/processes, ...] for the micro-batch scan."""
    pi, pc = jax.process_index(), jax.process_count()
    return {k: v.reshape((accum, v.shape[0] // accum) + v.shape[1:])[:, pi::pc] for k, v in batch.items()}


def run_sft(config, workdir: str, *, tb_dir: str | None = None) -> dict:
    rows_path = config.train.sft_rows or os.path.join(workdir, "rows", "sft_rows.jsonl")
    rows = read_jsonl(rows_path)
    if not rows:
        raise ValueError(f"no SFT rows in {rows_path}")
    eng = Engineer(config, stage="sft")
    eng.use_rows_prompt_style(rows)   # the exported params record the rows' prompt style
    return fit(config, workdir, eng, rows, lambda r: sft_example(r["messages"], eng.tokenizer), tb_dir=tb_dir)


def fit(config, workdir: str, eng: Engineer, rows: list[dict], to_example, *, stage: str = "sft",
        tb_dir: str | None = None) -> dict:
    """Rows -> examples (`to_example(row)`: ids and n_prompt or a token_mask; a row it rejects with
    KeyError/ValueError is logged and counted) -> config.train.sft training of `eng` under `workdir`
    (checkpoints, resume, TensorBoard) -> WORKDIR/final_params. Returns the summary."""
    s = config.train.sft
    eng.require_batch_divisible(s.batch_size, "train.sft.batch_size")
    tok = eng.tokenizer
    examples, bad = [], 0
    for r in rows:
        try:
            ex = to_example(r)
        except (KeyError, ValueError) as e:
            bad += 1
            log_event(stage, "bad_row", error=str(e)[:200])
            continue
        examples.append(ex)
    buckets = [b for b in s.buckets if b <= s.max_seq_len]
    per_step = s.batch_size * s.grad_accum
    ds, dropped = sft_dataset(examples, batch_size=per_step, buckets=buckets, pad_id=tok.pad_id,
                              seed=config.train.seed, epochs=s.epochs)
    total = len(ds)
    if total == 0:
        raise ValueError(f"no SFT batch fits train.sft.buckets={list(buckets)} ({dropped} rows too long)")
    log_event(stage, "data", rows=len(rows), bad_rows=bad, too_long=dropped, steps=total,
              tokens=int(sum(len(e["ids"]) for e in examples)))

    tx = sft_optimizer(s, total)
    lr_at = warmup_cosine(s.lr, total, s.warmup_ratio)   # the schedule inside tx, for the logs
    state, sh = eng.new_state(tx)
    ckpt = Checkpointer(os.path.join(workdir, "checkpoints"), max_to_keep=config.train.checkpoint.max_to_keep,
                        async_save=config.train.checkpoint.async_save)
    data_iter = iter(ds.to_iter_dataset())
    restored = ckpt.restore(abstract_like(state))
    if restored is not None:
        state, meta = restored
        data_iter.set_state(meta["data_state"])
    step_fn = jit_step(make_sft_step(eng.graphdef, eng.rest, tx, chunk_size=config.train.logprob_chunk_size,
                                     valid_vocab_size=tok.vocab_size), sh, eng.mesh)
    tb = TensorBoardWriter(tb_dir or os.path.join(workdir, "tensorboard"))
    start = int(state.step)
    bar = progress(total=total, initial=start, desc=stage, unit="step")
    last = {}
    t_start = time.monotonic()
    with jax.set_mesh(eng.mesh):
        for step in range(start, total):
            batch = next(data_iter)
            t0 = time.monotonic()
            state, m = step_fn(state, to_global(_accum(batch, s.grad_accum), eng.mesh))
            m = {k: float(v) for k, v in jax.device_get(m).items()}
            dt = time.monotonic() - t0
            real_tokens = float(np.sum(batch["attention_mask"]))
            last = {"sft/loss": m["loss"], "sft/confident_acc": m["confident_acc"], "sft/grad_norm": m["grad_norm"],
                    "sft/target_tokens": m["tokens"], "sft/tokens_per_s": real_tokens / max(dt, 1e-9),
                    "sft/step_s": dt, "sft/lr": float(lr_at(step))}
            if (step + 1) % s.log_every == 0 or step + 1 == total:
                tb.scalars(step + 1, last)
            bar.update(1)
            bar.set_postfix(loss=f"{m['loss']:.3f}", acc=f"{m['confident_acc']:.2f}")
            if (step + 1) % s.save_every == 0 or step + 1 == total:
                ckpt.save(step + 1, state, {"step": step + 1, "data_state": data_iter.get_state()})
    bar.close()
    ckpt.close()
    tb.close()
    eng.export(state.params, workdir)
    summary = {"steps": total, "rows": len(rows), "examples": len(examples), "bad_rows": bad, "too_long": dropped,
               "final_loss": last.get("sft/loss"), "seconds": round(time.monotonic() - t_start, 1)}
    log_event(stage, "done", **summary)
    return summary
