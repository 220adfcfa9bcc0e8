"""`hr1 grpo`: online GRPO with real reruns as the reward (reference §6).

One step:
  RL rows (grain, groups of one benchmark) -> jitted sampler, G samples per prompt with their
  log-probs -> parse/validate/compile -> subprocess workers rerun the same task identities ->
  rewards -> group-relative advantages (eval_failed samples excluded) -> [dynamic sampling] ->
  rollout buffer (grain: shuffle, minibatch, per-host shard) -> `iterations` jitted updates ->
  weights moved to the sampler layout on device.
Every step logs TensorBoard scalars (reward, validity, deltas, clip fractions, KL, entropy, grad
norm, tokens/s, phase times, MFU when peak FLOP/s is configured) and the best/worst patch text;
orbax checkpoints (state, rollout step, RNG key, data-iterator state) make a killed run resume.

Curves that can show learning: `reward/vs_start_greedy` is each sample's reward minus the start
policy's (the SFT engineer's) greedy reward on the same row, so the prompt mix of a step cancels;
`reward/kept_mean` is the reward of the groups the update used. With validation rows, every
`eval_every` steps the greedy policy is scored on that fixed set (`val/*`, also the fixed probe)
and the best-scoring step's params are saved as WORKDIR/best_params beside final_params.
`permute_rewards` (the null control) shuffles each round's rewards across its samples.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time

import jax
import numpy as np
from flax import nnx

from hr1_jax.data.rows import read_jsonl
from hr1_jax.errors import InputError
from hr1_jax.models.flops import flops_per_token
from hr1_jax.rollout.reward import RewardContext, score_group
from hr1_jax.train.checkpoint import Checkpointer, abstract_like, key_from_json, key_to_json
from hr1_jax.train.data import buffer_dataset, prompt_ids, rl_group_dataset, row_benchmark
from hr1_jax.train.engine import Engineer, save_params
from hr1_jax.train.grpo_step import grpo_optimizer, make_grpo_step
from hr1_jax.train.losses import LossConfig, finalize_metrics, group_advantages
from hr1_jax.train.step import jit_step, logprobs_fn, to_global
from hr1_jax.utils.jsonsafe import write_json
from hr1_jax.utils.logging import log_event
from hr1_jax.utils.progress import progress
from hr1_jax.utils.tensorboard import TensorBoardWriter

STOP = ("</patch>",)
LENGTH_BUCKET = 128
BEST_DIR = "best_params"   # <workdir>/best_params: the validation-chosen step's params (as final_params)


@dataclasses.dataclass
class Sample:
    row: dict
    prompt: list[int]
    response: list[int]
    sampler_logp: list[float]
    text: str
    group: int
    reward: float | None = None
    valid: bool = False           # reward known (not eval_failed)
    result: object = None
    advantage: float = 0.0


def _bucket(n: int) -> int:
    return -(-n // LENGTH_BUCKET) * LENGTH_BUCKET


def update_fns(config, graphdef, rest, tx, shardings, mesh, valid_vocab_size: int):
    """(step_fn, logp_fn): the jitted GRPO update `step_fn(state, batch) -> (state, metrics)` and the
    log-prob pass `logp_fn(params, input_ids, attention_mask)` that gives it its old / reference
    log-probs, both scored under the sampler's policy: its temperature, a softmax over the
    tokenizer's `valid_vocab_size` ids only."""
    g = config.train.grpo
    loss_cfg = LossConfig(eps_clip=g.eps_clip, eps_clip_high=g.eps_clip_high, tis_cap=g.tis_cap,
                          kl_coef=g.kl_coef, kl_estimator=g.kl_estimator, entropy_coef=g.entropy_coef,
                          agg_mode=g.agg_mode)
    lp_kw = dict(chunk_size=config.train.logprob_chunk_size, temperature=g.temperature,
                 valid_vocab_size=valid_vocab_size)
    step_fn = jit_step(make_grpo_step(graphdef, rest, tx, loss_cfg, with_entropy=True, **lp_kw), shardings, mesh)
    return step_fn, logprobs_fn(graphdef, rest, **lp_kw)


def collate(samples: list[Sample | None], length: int, pad_id: int) -> dict:
    """Right-padded [B, L] arrays; `None` entries are inert padding rows (zero mask)."""
    b = len(samples)
    ids = np.full((b, length), pad_id, np.int32)
    attn = np.zeros((b, length), np.int32)
    mask = np.zeros((b, length - 1), np.float32)
    slp = np.zeros((b, length - 1), np.float32)
    adv = np.zeros((b,), np.float32)
    for i, s in enumerate(samples):
        if s is None:
            continue
        seq = s.prompt + s.response
        n, p = len(seq), len(s.prompt)
        ids[i, :n] = seq
        attn[i, :n] = 1
        mask[i, p - 1:n - 1] = 1.0
        slp[i, p - 1:n - 1] = s.sampler_logp
        adv[i] = s.advantage
    return {"input_ids": ids, "attention_mask": attn, "loss_mask": mask, "sampler_logp": slp, "advantages": adv}


def assign_advantages(samples: list[Sample], *, std_normalize: bool = True, eps: float = 1e-6
                      ) -> list[list[Sample]]:
    """Group-relative advantages in place (eval_failed samples get 0 and stay out of the group
    statistics); returns the samples grouped by prompt."""
    by_group: dict[int, list[Sample]] = {}
    for s in samples:
        by_group.setdefault(s.group, []).append(s)
    groups = list(by_group.values())
    width = max(len(g) for g in groups)
    rewards = np.zeros((len(groups), width))
    valid = np.zeros((len(groups), width), bool)
    for i, grp in enumerate(groups):
        for j, s in enumerate(grp):
            rewards[i, j] = s.reward if s.valid else 0.0
            valid[i, j] = s.valid
    adv = group_advantages(rewards, valid, std_normalize=std_normalize, eps=eps)
    for i, grp in enumerate(groups):
        for j, s in enumerate(grp):
            s.advantage = float(adv[i, j])
    return groups


def informative(group: list[Sample]) -> bool:
    """Dynamic sampling's keep rule (reference `check_reward_nonzero_std`): every sample has a
    reward and the population std of the group's rewards is > 0."""
    r = [s.reward for s in group if s.valid]
    return len(r) == len(group) and len(r) >= 2 and float(np.std(r)) > 0


class GRPOTrainer:
    def __init__(self, config, workdir: str, *, rows: list[dict] | None = None, tb_dir: str | None = None,
                 reward_ctx: RewardContext | None = None, val_rows: list[dict] | None = None):
        self.config, self.g, self.workdir = config, config.train.grpo, workdir
        rows_path = config.train.rows or os.path.join(workdir, "rows", "rl_grouped.jsonl")
        rows = rows if rows is not None else read_jsonl(rows_path)
        self.eng = Engineer(config, stage="grpo")
        self.eng.require_batch_divisible(self.g.micro_batch, "train.grpo.micro_batch")
        tok = self.eng.tokenizer
        lengths = [len(prompt_ids(tok, r)) for r in rows]
        self.rows = [r for r, n in zip(rows, lengths) if n <= self.g.max_prompt_tokens]
        too_long = len(rows) - len(self.rows)
        if not self.rows:
            raise InputError(f"no RL rows fit train.grpo.max_prompt_tokens={self.g.max_prompt_tokens}: "
                             f"the shortest of {len(rows)} prompts has {min(lengths, default=0)} tokens")
        log_event("grpo", "data", rows=len(self.rows), too_long=too_long)
        self.eng.use_rows_prompt_style(self.rows)   # the exported params record the rows' prompt style
        self.dataset = rl_group_dataset(self.rows, self.g.prompts_per_step, config.train.seed)
        self.data_iter = iter(self.dataset.to_iter_dataset())
        self.tx = grpo_optimizer(self.g)
        self.state, sh = self.eng.new_state(self.tx)
        self.ref_params = self.eng.init_params if self.g.kl_coef > 0 else None
        self.step_fn, self.logp_fn = update_fns(config, self.eng.graphdef, self.eng.rest, self.tx, sh,
                                                self.eng.mesh, tok.vocab_size)
        self.ckpt = Checkpointer(os.path.join(workdir, "checkpoints"),
                                 max_to_keep=config.train.checkpoint.max_to_keep,
                                 async_save=config.train.checkpoint.async_save)
        self.key = jax.random.key(config.train.seed)
        self.step = 0
        restored = self.ckpt.restore(abstract_like(self.state))
        if restored is not None:
            self.state, meta = restored
            self.step = int(meta["step"])
            self.key = key_from_json(meta["rng"])
            self.data_iter.set_state(meta["data_state"])
        self.tb = TensorBoardWriter(tb_dir or os.path.join(workdir, "tensorboard"))
        self.reward_ctx = reward_ctx or RewardContext(config, cache_dir=config.rollout.cache_dir
                                                      or os.path.join(workdir, "reward_cache"))
        self._own_ctx = reward_ctx is None
        self.val_rows = list(val_rows or [])
        self.best = self._read_json("best.json") or {"step": None, "val_reward": None}
        self.start_greedy: dict[str, float] = {}

    def _read_json(self, name: str) -> dict | None:
        path = os.path.join(self.workdir, name)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    def _greedy_scores(self, rows: list[dict]) -> list:
        """The current sampler's greedy response to each row, rerun: [RewardResult]."""
        from hr1_jax.train.evaluate import engineer_responses
        texts = engineer_responses(self.eng.sampler, self.eng.tokenizer, rows,
                                   max_new_tokens=self.g.max_response_tokens)
        return score_group(rows, texts, self.reward_ctx)

    def _start_greedy(self) -> dict[str, float]:
        """Each train row's greedy reward under the start policy (stored, so a resumed run reuses
        it): the per-row baseline of `reward/vs_start_greedy`."""
        got = self._read_json("start_greedy.json")
        if got is None:
            results = self._greedy_scores(self.rows)
            got = {_tag(r): float(res.score) for r, res in zip(self.rows, results) if not res.excluded}
            write_json(os.path.join(self.workdir, "start_greedy.json"), got)
        return got

    def _validate(self, step: int) -> dict:
        """Greedy rewards on the validation rows (eval_failed rows left out); a new best GRPO step
        (step > 0) saves its params to WORKDIR/best_params."""
        results = self._greedy_scores(self.val_rows)
        scored = [(r, res) for r, res in zip(self.val_rows, results) if not res.excluded]
        m = {"val/reward": float(np.mean([res.score for _, res in scored])) if scored else 0.0,
             "val/valid_patch_rate": float(np.mean([bool(res.valid_patch) for res in results])),
             "val/eval_failed": float(len(results) - len(scored))}
        for bench in sorted({row_benchmark(r) for r, _ in scored}):
            m[f"val/{bench}/reward"] = float(np.mean([res.score for r, res in scored if row_benchmark(r) == bench]))
        if step > 0 and scored and (self.best["val_reward"] is None or m["val/reward"] > self.best["val_reward"]):
            params = nnx.state(nnx.merge(self.eng.graphdef, self.state.params, self.eng.rest))
            save_params(params, self.eng.cfg, os.path.join(self.workdir, BEST_DIR), self.eng.tokenizer)
            self.best = dict(self.best, step=step, val_reward=m["val/reward"])
            write_json(os.path.join(self.workdir, "best.json"), self.best)
        m["val/best_step"] = float(self.best["step"] or 0)
        self.tb.scalars(step, m)
        log_event("grpo", "validation", step=step, **{k: round(v, 5) for k, v in m.items()})
        return m

    # ------------------------------------------------------------------------------- phases
    def _sample(self, rows: list[dict], key, group_offset: int = 0) -> list[Sample]:
        tok, G = self.eng.tokenizer, self.g.samples_per_prompt
        items = [(group_offset + gi, row) for gi, row in enumerate(rows) for _ in range(G)]
        prompts = [prompt_ids(tok, row) for _, row in items]
        out = self.eng.sampler.generate(prompts, key=key, max_new_tokens=self.g.max_response_tokens,
                                        temperature=self.g.temperature, top_k=self.g.top_k, top_p=self.g.top_p,
                                        stop=STOP)
        return [Sample(row=row, prompt=p, response=list(r.tokens), sampler_logp=list(r.logprobs), text=r.text,
                       group=gi)
                for (gi, row), p, r in zip(items, prompts, out)]

    def _rerun(self, samples: list[Sample]) -> None:
        results = score_group([s.row for s in samples], [s.text for s in samples], self.reward_ctx)
        for s, res in zip(samples, results):
            s.result, s.valid = res, not res.excluded
            s.reward = float(res.score) if s.valid else None

    def _score(self, samples: list[Sample]) -> None:
        self._rerun(samples)
        if self.g.permute_rewards:   # null control: rewards no longer belong to their samples
            scored = [s for s in samples if s.valid]
            rng = np.random.default_rng([self.config.train.seed, self.step, len(samples)])
            for s, r in zip(scored, rng.permutation([s.reward for s in scored])):
                s.reward = float(r)

    def _rollout(self, key) -> tuple[list[Sample], dict]:
        """Sample + score + advantages for one step's prompt groups. With dynamic sampling, groups
        whose rewards have zero spread (or an eval_failed member) are dropped and more prompts are
        drawn, up to `max_resample_rounds` extra rounds."""
        t = {"sample": 0.0, "rerun": 0.0}
        kept: list[list[Sample]] = []
        every: list[Sample] = []
        dropped = 0
        rounds = 1 + (self.g.max_resample_rounds if self.g.dynamic_sampling else 0)
        for rnd in range(rounds):
            rows = next(self.data_iter)   # prompts_per_step rows of one benchmark; each row = one group
            t0 = time.monotonic()
            samples = self._sample(rows, jax.random.fold_in(key, rnd), group_offset=rnd * len(rows))
            t["sample"] += time.monotonic() - t0
            t0 = time.monotonic()
            self._score(samples)
            t["rerun"] += time.monotonic() - t0
            every += samples
            for grp in assign_advantages(samples, std_normalize=self.g.std_normalize, eps=self.g.adv_eps):
                if not self.g.dynamic_sampling or informative(grp):
                    kept.append(grp)
                else:
                    dropped += 1
            if len(kept) >= self.g.prompts_per_step:
                break
        kept = kept[: self.g.prompts_per_step]
        return [s for grp in kept for s in grp], dict(t, dropped_groups=dropped, all=every)

    def _update(self, samples: list[Sample], step: int) -> dict:
        g = self.g
        train = [s for s in samples if s.valid]          # eval_failed samples never enter the update
        train = train[: g.global_batch] + [None] * (g.global_batch - len(train[: g.global_batch]))
        length = _bucket(max((len(s.prompt) + len(s.response)) for s in train if s is not None)) \
            if any(s is not None for s in train) else LENGTH_BUCKET
        pad = self.eng.tokenizer.pad_id
        full = collate(train, length, pad)
        # Trust-region anchor: the trainer's log-probs before this step's updates. Under the mesh, as
        # the step: a kernel that runs per device (splash attention) sees the mesh there too.
        mb = g.micro_batch

        def logprobs(params):
            with jax.set_mesh(self.eng.mesh):
                return np.concatenate([np.asarray(self.logp_fn(params, full["input_ids"][i:i + mb],
                                                               full["attention_mask"][i:i + mb]))
                                       for i in range(0, len(train), mb)])

        old = logprobs(self.state.params)
        ref = logprobs(self.ref_params) if self.ref_params is not None else None
        index = list(range(len(train)))

        def batch_of(idxs):
            out = {k: v[idxs] for k, v in full.items()}
            out["old_logp"] = old[idxs]
            if ref is not None:
                out["ref_logp"] = ref[idxs]
            local_mb = mb // jax.process_count()     # this host's share of every micro-batch
            return {k: v.reshape((len(idxs) // local_mb, local_mb) + v.shape[1:]) for k, v in out.items()}

        sums, extrema, losses, gnorms = {}, {}, [], []
        minibatch = g.global_batch // g.iterations
        tokens = float(full["attention_mask"].sum()) * g.buffer_epochs
        t0 = time.monotonic()
        for epoch in range(g.buffer_epochs):
            buffer = buffer_dataset(index, minibatch=minibatch, seed=self.config.train.seed + step * 131 + epoch,
                                    collate=lambda xs: np.asarray(xs, np.int64),
                                    process_index=jax.process_index(), process_count=jax.process_count())
            for idxs in buffer:
                with jax.set_mesh(self.eng.mesh):
                    self.state, m = self.step_fn(self.state, to_global(batch_of(idxs), self.eng.mesh))
                m = jax.device_get(m)
                losses.append(float(m["loss"]))
                gnorms.append(float(m["grad_norm"]))
                for k, v in m["sums"].items():
                    sums[k] = sums.get(k, 0.0) + float(v)
                for k, v in m["extrema"].items():
                    f = max if k.endswith("max") else min
                    extrema[k] = f(extrema.get(k, float(v)), float(v))
        dt = time.monotonic() - t0
        out = {f"train/{k}": v for k, v in finalize_metrics(sums, extrema).items()}
        out.update({"train/loss": float(np.mean(losses)), "train/grad_norm": float(np.mean(gnorms)),
                    "perf/update_s": dt, "perf/update_tokens_per_s": tokens / max(dt, 1e-9)})
        peak = float(self.config.train.peak_flops_per_device)
        if peak > 0:
            achieved = flops_per_token(self.eng.cfg, length, training=True) * tokens / max(dt, 1e-9)
            out["perf/mfu"] = achieved / (peak * jax.device_count())
        return out

    # ---------------------------------------------------------------------------------- loop
    def _log(self, step: int, samples: list[Sample], info: dict, metrics: dict) -> dict:
        every = info["all"]
        scored = [s for s in every if s.valid]
        rewards = [s.reward for s in scored]
        valid_patch = [bool(s.result.valid_patch) for s in every]
        m = {"reward/mean": float(np.mean(rewards)) if rewards else 0.0,
             "reward/std": float(np.std(rewards)) if rewards else 0.0,
             "reward/valid_patch_rate": float(np.mean(valid_patch)) if every else 0.0,
             "reward/delta_pass_rate": float(np.mean([s.result.delta_pass_rate for s in scored])) if scored else 0.0,
             "reward/eval_failed": float(sum(not s.valid for s in every)),
             "reward/dropped_groups": float(info["dropped_groups"]),
             "reward/zero_adv_frac": float(np.mean([s.advantage == 0 for s in samples])) if samples else 0.0,
             "reward/cache_hit_frac": float(np.mean([bool(s.result.cache_hit) for s in every])) if every else 0.0,
             "perf/sample_s": info["sample"], "perf/rerun_s": info["rerun"],
             "perf/sample_tokens_per_s": sum(len(s.response) for s in every) / max(info["sample"], 1e-9),
             "perf/response_tokens_mean": float(np.mean([len(s.response) for s in every])) if every else 0.0}
        m["train/lr"] = float(self.g.lr)   # grpo_optimizer is constant-lr
        kept = [s.reward for s in samples if s.valid]
        m["reward/kept_mean"] = float(np.mean(kept)) if kept else 0.0
        rel = [s.reward - self.start_greedy[_tag(s.row)] for s in scored if _tag(s.row) in self.start_greedy]
        if rel:
            m["reward/vs_start_greedy"] = float(np.mean(rel))
        for bench in sorted({row_benchmark(s.row) for s in scored}):
            m[f"reward/{bench}/mean"] = float(np.mean([s.reward for s in scored if row_benchmark(s.row) == bench]))
        m.update(metrics)
        self.tb.scalars(step, m)
        if scored:
            best = max(scored, key=lambda s: s.reward)
            worst = min(scored, key=lambda s: s.reward)
            for tag, s in (("best", best), ("worst", worst)):
                self.tb.text(step, f"patch/{tag}", f"benchmark: {row_benchmark(s.row)}  \nreward: {s.reward:.4f}  "
                             f"\nstatus: {s.result.eval_status} {s.result.reason[:300]}\n\n```\n{s.text[:4000]}\n```")
        return m

    def run(self) -> dict:
        g = self.g
        bar = progress(total=g.num_steps, initial=self.step, desc="grpo", unit="step")
        history = []
        try:
            t_move = self.eng.sync_sampler(self.state.params)
            if g.start_greedy_baseline:
                self.start_greedy = self._start_greedy()
            if self.val_rows and self.step == 0:   # the start policy's validation reward: the line to beat
                self.best["start_val_reward"] = self._validate(0)["val/reward"]
                write_json(os.path.join(self.workdir, "best.json"), self.best)
            while self.step < g.num_steps:
                step = self.step + 1
                t_step = time.monotonic()
                samples, info = self._rollout(jax.random.fold_in(self.key, step))
                metrics = self._update(samples, step) if any(s.valid for s in samples) else {}
                t_move = self.eng.sync_sampler(self.state.params)
                metrics["perf/weight_move_s"] = t_move
                metrics["perf/step_s"] = time.monotonic() - t_step
                m = self._log(step, samples, info, metrics)
                self.step = step
                if self.val_rows and (step % g.eval_every == 0 or step == g.num_steps):
                    m.update(self._validate(step))
                history.append({"step": step, **m})
                if step % g.save_every == 0 or step == g.num_steps:
                    self.ckpt.save(step, self.state, {"step": step, "rng": key_to_json(self.key),
                                                      "data_state": self.data_iter.get_state()})
                bar.update(1)
                bar.set_postfix(reward=f"{m['reward/mean']:+.3f}", valid=f"{m['reward/valid_patch_rate']:.2f}",
                                kl=f"{m.get('train/ppo_kl', 0.0):.3f}")
                log_event("grpo", "step", step=step, num_steps=g.num_steps, **{k: round(v, 5) for k, v in m.items()})
        finally:
            bar.close()
            self.ckpt.close()
            self.tb.close()
            if self._own_ctx:
                self.reward_ctx.close()
        self.eng.export(self.state.params, self.workdir)
        return {"steps": self.step, "history": history, "best": dict(self.best)}


def _tag(row: dict) -> str:
    return (row.get("metadata") or {}).get("batch_tag") or json.dumps(row["prompt"], sort_keys=True)
