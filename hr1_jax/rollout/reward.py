"""The paired rerun reward (reference spec §5): parse -> validate -> compile -> rerun the SAME task
identities with the hooks installed -> reward = patched metric - baseline metric.

* invalid / runtime-no-op patch -> score 0.0 with the reason (as in the reference);
* infrastructure failure (target endpoint dead, worker crashes beyond the pool's retries, lock
  time-out) -> `eval_status="eval_failed"`, `score=None`, `excluded=True`: the sample is dropped
  from the update and counted, never scored 0, and NOT cached (reference gap 13: a transient failure
  must not become a sticky result);
* a rerun whose task manifests differ from the baseline's -> `IdentityError` is raised.

One bad response costs only itself: any crash while parsing, compiling or hashing it is its
counted `invalid_patch`, any crash of its rerun (pool, lock, cache files) its counted
`eval_failed`; the rest of its group is scored normally. Only an `IdentityError` (the batch is not
what the row claims, which no response causes) still propagates.

Results are cached content-addressed by (normalised patch, batch identity, reward context) under
`cache_dir/<batch>/<key>/reward.json`; an `fcntl` lock per key makes concurrent callers (threads or
processes) evaluate each key once, so identical patches in a GRPO group cost one rerun.
"""
from __future__ import annotations

import collections
import dataclasses
import fcntl
import json
import os
import threading
import time

from envs.base import canonical_sha256
from hr1_jax.rollout.identity import IdentityError, assert_rerun_matches, check_batch_identity
from hr1_jax.rollout.batches import gather_batch, submit_batch
from hr1_jax.rollout.pool import INFRA_ERROR, WorkerPool
from hr1_jax.utils.jsonsafe import json_safe, safe_str, write_json
from hr1_jax.utils.logging import log_event

CACHE_PROTOCOL = "hr1_paired_rerun_reward_v1"
OK, INVALID, NOOP, EVAL_FAILED = "ok", "invalid_patch", "runtime_noop_patch", "eval_failed"
RERUN_FIELDS = ("reward", "identity", "counts", "hook_events", "agent")   # what _evaluate reads of an episode


@dataclasses.dataclass
class RewardResult:
    score: float | None               # what the trainer reads; None only when excluded
    eval_status: str                  # ok | invalid_patch | runtime_noop_patch | eval_failed
    valid_patch: bool
    excluded: bool = False            # eval_failed: drop the sample from the update
    reason: str = ""
    benchmark: str = ""
    reward_metric: str = ""
    delta_average_reward: float = 0.0
    delta_pass_rate: float = 0.0
    baseline_average_reward: float = 0.0
    patched_average_reward: float = 0.0
    baseline_pass: int = 0
    patched_pass: int = 0
    batch_size: int = 0
    patched_rewards: dict = dataclasses.field(default_factory=dict)
    hook_calls: int = 0
    hook_errors: int = 0
    hook_timeouts: int = 0
    patch_hooks: list = dataclasses.field(default_factory=list)
    hook_effects: dict = dataclasses.field(default_factory=dict)   # hook -> {effect or status: count}
    target_tokens: int = 0            # total tokens the target reported over the rerun (0 if it reports none)
    cache_key: str = ""
    cache_hit: bool = False
    eval_s: float = 0.0

    def to_dict(self) -> dict:
        """The fields for serialising (nested containers shared, not deep-copied as by
        `dataclasses.asdict`: the cache write is on the parent's CPU beside the workers)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _sub(config, key):
    try:
        return config[key]
    except (KeyError, TypeError):
        return None


def _plain(section) -> dict:
    if section is None:
        return {}
    return section.to_dict() if hasattr(section, "to_dict") else dict(section)


class RewardContext:
    """Everything a reward evaluation needs besides the row: config, the worker pool (created on
    first use and owned unless passed in), the cache directory, and evaluation counters."""

    def __init__(self, config, *, pool: WorkerPool | None = None, cache_dir: str | None = None,
                 target: dict | None = None):
        self.config = config
        self.cache_dir = cache_dir or config.rollout.cache_dir or os.path.join(os.getcwd(), "reward_cache")
        self.target = target if target is not None else _plain(config.target)
        self._pool, self._own_pool = pool, pool is None
        self.counters = {"evaluations": 0, "cache_hits": 0, "eval_failed": 0, "invalid": 0, "deduped": 0}
        self._counter_lock = threading.Lock()

    def count(self, key: str, n: int = 1) -> None:
        with self._counter_lock:
            self.counters[key] += n

    @property
    def pool(self) -> WorkerPool:
        if self._pool is None:
            from hr1_jax.rollout.ray_backend import make_pool
            self._pool = make_pool(self.config)
        return self._pool

    def close(self) -> None:
        if self._own_pool and self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def reward_context(self, meta: dict) -> dict:
        """Everything that changes what a rerun means (part of the cache key)."""
        c, bench = self.config, meta["benchmark"]
        target = {k: v for k, v in self.target.items() if k not in ("base_url", "api_key_env", "concurrency",
                                                                    "timeout_s", "max_retries")}
        return {"cache_protocol": CACHE_PROTOCOL, "benchmark": bench, "split": meta["split"],
                "seed": int(meta["seed"]), "target": target, "env": _plain(_sub(c, bench)),
                "runtime": _plain(c.runtime), "time_budget_s": c.patch_protocol.time_budget_s,
                "line_budget": c.patch_protocol.line_budget,
                "max_forced_actions_per_episode": c.patch_protocol.max_forced_actions_per_episode,
                "response_protocol": c.patch_protocol.response_protocol,
                "metric": c.rollout.reward_metric, "threshold": float(meta["reward_threshold"]),
                "valid_bonus": float(c.rollout.valid_bonus)}


def _meta(row: dict, ctx: "RewardContext | None" = None) -> dict:
    meta = row.get("metadata") or {}
    for key in ("benchmark", "split", "seed", "task_ids", "baseline_rewards", "identity", "reward_threshold"):
        if key not in meta:
            raise IdentityError(f"row metadata lacks {key!r}: cannot pair a rerun with its baseline")
    check_batch_identity(meta["identity"], meta["task_ids"])
    if sorted(str(t) for t in meta["task_ids"]) != sorted(meta["baseline_rewards"]):
        raise IdentityError("baseline_rewards do not cover exactly the row's task_ids")
    if ctx is not None and meta.get("target_agent_name") != ctx.target.get("name"):
        raise IdentityError(f"baseline target {meta.get('target_agent_name')!r} != rerun target "
                            f"{ctx.target.get('name')!r}: the rerun must use the target that made the baseline")
    return meta


def _describe(error: BaseException) -> str:
    return safe_str(f"{type(error).__name__}: {error}")[:1000]


def prepare_patch(text: str, benchmark: str, config) -> tuple[dict | None, str, str]:
    """Parse + normalise + compile a response. Returns (patch, status, reason); a bad response
    never raises."""
    from hr1_jax.patch import PatchError, compile_patch, normalize_options, parse_response
    pc = config.patch_protocol
    options = normalize_options(pc)
    try:
        patch = parse_response(text, benchmark, pc.response_protocol, **options)
        compile_patch(patch, benchmark, time_budget_s=pc.time_budget_s, line_budget=pc.line_budget, **options)
    except PatchError as e:
        status = NOOP if "noop" in str(getattr(e, "code", "")).lower() else INVALID
        return None, status, safe_str(str(e))[:1000]
    except Exception as e:  # a parser/compiler crash (RecursionError, MemoryError, ...) on this text only
        log_event("reward", "prepare_crashed", benchmark=benchmark, error=_describe(e))
        return None, INVALID, f"patch preparation crashed: {_describe(e)}"
    if patch.get("benchmark", benchmark) != benchmark:
        return None, INVALID, f"patch is for {patch.get('benchmark')!r}, batch is {benchmark!r}"
    return patch, OK, ""


def cache_key(patch: dict, meta: dict, ctx: RewardContext) -> str:
    """Hashes the json_safe form (the same key as the raw one whenever the patch encodes)."""
    return canonical_sha256(json_safe({"patch": patch, "batch": meta["identity"]["batch_sha256"],
                                       "baseline_rewards": meta["baseline_rewards"],
                                       "context": ctx.reward_context(meta)}))[:32]


def _no_patch(meta: dict, status: str, reason: str, metric: str) -> RewardResult:
    base = [float(v) for v in meta["baseline_rewards"].values()]
    avg = sum(base) / max(1, len(base))
    passed = sum(v >= float(meta["reward_threshold"]) for v in base)
    return RewardResult(score=0.0, eval_status=status, valid_patch=False, reason=reason,
                        benchmark=meta["benchmark"], reward_metric=metric, baseline_average_reward=avg,
                        patched_average_reward=avg, baseline_pass=passed, patched_pass=passed,
                        batch_size=len(base))


class _KeyLock:
    """Exclusive fcntl lock on `<dir>/<key>.lock` (works across threads and processes)."""

    def __init__(self, path: str, timeout_s: float):
        self.path, self.timeout_s, self.fd = path, timeout_s, None

    def acquire(self, wait: bool) -> bool:
        """True once held; False at once when another caller holds it and not `wait`;
        TimeoutError when it stays held past `timeout_s`."""
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if not wait or time.monotonic() > deadline:
                    os.close(self.fd)
                    self.fd = None
                    if not wait:
                        return False
                    raise TimeoutError(f"cache lock {self.path} held longer than {self.timeout_s}s") from None
                time.sleep(0.05)

    def release(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


def _read_cache(path: str) -> RewardResult | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return RewardResult(**data)
    except (OSError, ValueError, TypeError):
        return None


def _eval_failed(meta: dict, key: str, reason: str, ctx: RewardContext, eval_s: float = 0.0) -> RewardResult:
    return RewardResult(score=None, eval_status=EVAL_FAILED, valid_patch=True, excluded=True,
                        reason=reason[:1000], benchmark=meta["benchmark"],
                        reward_metric=ctx.config.rollout.reward_metric, cache_key=key, eval_s=eval_s)


def hook_effects(episodes: list[dict]) -> dict:
    """How often each hook fired over a rerun, by applied effect (or runner status when it had none)."""
    out: dict = {}
    for ep in episodes:
        for ev in ep.get("hook_events") or []:
            label = ev.get("effect") or ev.get("status") or "none"
            per_hook = out.setdefault(ev.get("hook", "?"), {})
            per_hook[label] = per_hook.get(label, 0) + 1
    return out


def target_tokens(episodes: list[dict]) -> int:
    """Tokens the target reported over episodes (OpenAI usage totals; 0 for scripted targets)."""
    return sum(int(((ep.get("agent") or {}).get("usage") or {}).get("total_tokens", 0)) for ep in episodes)


@dataclasses.dataclass
class _Rerun:
    """A rerun in flight: its jobs are with the pool and the key's lock is held until it is stored."""
    patch: dict
    meta: dict
    key: str
    folder: str
    lock: _KeyLock
    handles: list
    t0: float


def _evaluate(run: _Rerun, episodes: list[dict], ctx: RewardContext) -> RewardResult:
    patch, meta, key = run.patch, run.meta, run.key
    metric = ctx.config.rollout.reward_metric
    failed = [ep for ep in episodes if ep["status"] == INFRA_ERROR]
    if failed:
        reason = "; ".join(f"task {ep['task_id']}: {str(ep.get('error'))[:200]}" for ep in failed[:3])
        return _eval_failed(meta, key, safe_str(f"{len(failed)}/{len(episodes)} tasks failed: {reason}"), ctx,
                            eval_s=round(time.monotonic() - run.t0, 3))
    assert_rerun_matches(meta["identity"], episodes)
    tau = float(meta["reward_threshold"])
    base = {str(k): float(v) for k, v in meta["baseline_rewards"].items()}
    patched = {str(ep["task_id"]): float(ep["reward"]) for ep in episodes}
    n = len(base)
    b_avg, p_avg = sum(base.values()) / n, sum(patched.values()) / n
    b_pass, p_pass = sum(v >= tau for v in base.values()), sum(v >= tau for v in patched.values())
    d_avg, d_pass = p_avg - b_avg, (p_pass - b_pass) / max(1, n)
    delta = d_avg if metric == "delta_average_reward" else d_pass
    counts = [ep.get("counts") or {} for ep in episodes]
    return RewardResult(
        score=delta + float(ctx.config.rollout.valid_bonus), eval_status=OK, valid_patch=True,
        benchmark=meta["benchmark"], reward_metric=metric, delta_average_reward=d_avg, delta_pass_rate=d_pass,
        baseline_average_reward=b_avg, patched_average_reward=p_avg, baseline_pass=b_pass, patched_pass=p_pass,
        batch_size=n, patched_rewards=patched, hook_calls=sum(c.get("hook_calls", 0) for c in counts),
        hook_errors=sum(c.get("hook_errors", 0) for c in counts),
        hook_timeouts=sum(c.get("hook_timeouts", 0) for c in counts),
        patch_hooks=[a.get("hook") for a in patch.get("actions", [])], hook_effects=hook_effects(episodes),
        target_tokens=target_tokens(episodes),
        cache_key=key,
        eval_s=round(time.monotonic() - run.t0, 3))


def _hit(cached: RewardResult, ctx: RewardContext) -> RewardResult:
    ctx.count("cache_hits", 1)
    cached.cache_hit = True
    return cached


def _begin(patch: dict, meta: dict, key: str, ctx: RewardContext, wait: bool) -> "RewardResult | _Rerun | None":
    """The cached result, or the rerun started under the key's lock; None (only when not `wait`)
    while another caller holds the lock."""
    folder = os.path.join(ctx.cache_dir, meta["identity"]["batch_sha256"][:16], key)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "reward.json")
    cached = _read_cache(path)
    if cached is not None:
        return _hit(cached, ctx)
    lock = _KeyLock(os.path.join(folder, "eval.lock"), float(ctx.config.rollout.cache_lock_timeout_s))
    if not lock.acquire(wait):
        return None
    try:
        cached = _read_cache(path)  # another caller may have finished while we waited
        if cached is not None:
            lock.release()
            return _hit(cached, ctx)
        ctx.count("evaluations", 1)
        handles = submit_batch(ctx.pool, meta["benchmark"], meta["split"], [int(t) for t in meta["task_ids"]],
                               target=ctx.target, seed=int(meta["seed"]), patch=patch, fields=RERUN_FIELDS)
    except BaseException:
        if lock.fd is not None:
            lock.release()
        raise
    return _Rerun(patch, meta, key, folder, lock, handles, time.monotonic())


def _finish(run: _Rerun, ctx: RewardContext) -> RewardResult:
    """Wait for the rerun's episodes, score them; only an ok result is cached; the lock is released."""
    try:
        result = _evaluate(run, gather_batch(run.handles), ctx)
        if result.eval_status == OK:
            write_json(os.path.join(run.folder, "patch.json"), run.patch)
            write_json(os.path.join(run.folder, "reward.json"), result.to_dict())
        else:
            ctx.count("eval_failed", 1)
            log_event("reward", "eval_failed", key=run.key, reason=result.reason)
        return result
    finally:
        run.lock.release()


def _contained(step, meta: dict, key: str, ctx: RewardContext):
    """`step()`; any crash on the way (pool, lock time-out, cache files) is this sample's eval_failed."""
    try:
        return step()
    except IdentityError:
        raise  # the batch is not what its row claims: no sample status can make that right
    except Exception as e:
        reason = f"rerun failed: {_describe(e)}"
        ctx.count("eval_failed", 1)
        log_event("reward", "eval_failed", key=key, reason=reason)
        return _eval_failed(meta, key, reason, ctx)


def _score_keyed(patch: dict, meta: dict, key: str, ctx: RewardContext) -> RewardResult:
    """Cache -> lock (waited for) -> rerun -> cache."""
    started = _contained(lambda: _begin(patch, meta, key, ctx, wait=True), meta, key, ctx)
    if isinstance(started, _Rerun):
        return _contained(lambda: _finish(started, ctx), meta, key, ctx)
    return started


def score_patch(patch: dict, row: dict, ctx: RewardContext) -> RewardResult:
    """Score an already validated, normalised patch."""
    meta = _meta(row, ctx)
    return _score_keyed(patch, meta, cache_key(patch, meta, ctx), ctx)


def _keyed_patch(text: str, meta: dict, ctx: RewardContext) -> tuple[dict | None, str, RewardResult | None]:
    """(patch, cache key, None) for a scorable response, else (None, "", its counted invalid result)."""
    patch, status, reason = prepare_patch(text, meta["benchmark"], ctx.config)
    if patch is not None:
        try:
            return patch, cache_key(patch, meta, ctx), None
        except Exception as e:  # a patch that cannot be hashed cannot be cached or deduped
            status, reason = INVALID, f"cache key failed: {_describe(e)}"
            log_event("reward", "cache_key_failed", reason=reason)
    ctx.count("invalid", 1)
    return None, "", _no_patch(meta, status, reason, ctx.config.rollout.reward_metric)


def score_response(row: dict, response_text: str, ctx: RewardContext) -> RewardResult:
    """The reward of one engineer response for one RL row."""
    return score_group([row], [response_text], ctx)[0]


def score_group(rows: list[dict], responses: list[str], ctx: RewardContext,
                max_parallel: int | None = None) -> list[RewardResult]:
    """Score many (row, response) pairs: invalid ones resolve at once, identical (patch, batch)
    pairs are evaluated once, distinct ones run in parallel over the pool. A failing response
    gets its own counted status; it never fails the group.

    With `rollout.backend=ray` in a multi-host run every host holds the same samples and shares
    one rollout fleet, so process 0 scores the group once and broadcasts the results."""
    if len(rows) != len(responses):
        raise ValueError(f"{len(rows)} rows but {len(responses)} responses")
    if ctx.config.rollout.backend == "ray":
        import jax
        if jax.process_count() > 1:
            return _scored_on_process_zero(lambda: _score_here(rows, responses, ctx, max_parallel))
    return _score_here(rows, responses, ctx, max_parallel)


def _scored_on_process_zero(score) -> list[RewardResult]:
    """`score()` on process 0, its results (or its IdentityError) broadcast to every process."""
    import jax
    import numpy as np
    from jax.experimental import multihost_utils
    source = jax.process_index() == 0
    payload, error = b"", None
    if source:
        try:
            payload = json.dumps({"results": [json_safe(r.to_dict()) for r in score()]}).encode()
        except Exception as e:  # every process must still join the broadcast, then fail alike
            error = e
            kind = "identity" if isinstance(e, IdentityError) else "other"
            payload = json.dumps({"error": _describe(e), "kind": kind}).encode()
    size = int(multihost_utils.broadcast_one_to_all(np.int32(len(payload)), is_source=source))
    buf = np.frombuffer(payload, np.uint8) if source else np.zeros(size, np.uint8)
    data = json.loads(bytes(np.asarray(multihost_utils.broadcast_one_to_all(buf, is_source=source))))
    if error is not None:
        raise error
    if "error" in data:
        cls = IdentityError if data["kind"] == "identity" else RuntimeError
        raise cls(f"process 0 failed to score the group: {data['error']}")
    return [RewardResult(**r) for r in data["results"]]


def _score_here(rows: list[dict], responses: list[str], ctx: RewardContext,
                max_parallel: int | None) -> list[RewardResult]:
    checked: dict = {}   # a group's rows share one metadata object: check it once
    for row in rows:   # a row that is not what it claims fails before any rerun
        if id(row.get("metadata")) not in checked:
            checked[id(row.get("metadata"))] = _meta(row, ctx)
    metas = [checked[id(row.get("metadata"))] for row in rows]
    results: list[RewardResult | None] = [None] * len(rows)
    scored: dict[str, RewardResult] = {}
    slots: dict[str, list[int]] = {}
    waiting: dict[str, tuple[dict, dict]] = {}    # keys another caller is evaluating
    group = _InFlight(ctx, max_parallel, scored)
    prepared: dict = {}   # a GRPO group repeats texts: parse, compile and hash each distinct one once
    try:
        for i, (row, text, meta) in enumerate(zip(rows, responses, metas)):
            memo = (text, id(row.get("metadata")))
            if memo not in prepared:
                prepared[memo] = _keyed_patch(text, meta, ctx)
            elif prepared[memo][2] is not None:
                ctx.count("invalid", 1)
            patch, key, rejected = prepared[memo]
            if rejected is not None:
                results[i] = rejected
                continue
            if key not in slots:  # start it now: validating the rest overlaps with the workers
                group.make_room()
                started = _contained(lambda: _begin(patch, meta, key, ctx, wait=False), meta, key, ctx)
                if started is None:
                    waiting[key] = (patch, meta)
                elif isinstance(started, _Rerun):
                    group.add(started)
                else:
                    scored[key] = started
            slots.setdefault(key, []).append(i)
    finally:  # never leave this group's reruns running (or their locks held) behind an error
        group.finish_all()
    group.raise_error()
    for key, (patch, meta) in waiting.items():   # after our own reruns: their locks are released
        scored[key] = _score_keyed(patch, meta, key, ctx)
    ctx.count("deduped", sum(len(v) - 1 for v in slots.values()))
    for key, idx in slots.items():
        first = scored[key]
        for n, i in enumerate(idx):
            results[i] = first if n == 0 else dataclasses.replace(first, cache_hit=first.eval_status == OK)
    return results


class _InFlight:
    """A group's reruns in flight on the pool (at most `limit`), finished oldest first in this thread:
    no rerun threads, whose wake-ups and hand-offs were parent CPU beside the workers. The first
    IdentityError is kept until every rerun is finished and its lock released."""

    def __init__(self, ctx: RewardContext, max_parallel: int | None, scored: dict):
        self.ctx, self.max_parallel, self.scored = ctx, max_parallel, scored
        self.runs: collections.deque[_Rerun] = collections.deque()
        self.error: IdentityError | None = None

    def make_room(self) -> None:
        # the pool is asked for its size only here: a group of cache hits and invalid texts starts none
        limit = max(1, self.max_parallel or 4 * self.ctx.pool.num_workers)
        while len(self.runs) >= limit:
            self._finish_oldest()

    def add(self, run: _Rerun) -> None:
        self.runs.append(run)

    def _finish_oldest(self) -> None:
        run = self.runs.popleft()
        try:
            self.scored[run.key] = _contained(lambda: _finish(run, self.ctx), run.meta, run.key, self.ctx)
        except IdentityError as e:
            self.error = self.error or e

    def finish_all(self) -> None:
        while self.runs:
            self._finish_oldest()

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error
