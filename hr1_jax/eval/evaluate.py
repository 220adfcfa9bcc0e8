"""Fixed-batch run-patch-rerun evaluation, held-out transfer, and budget-matched baselines.

Protocol per target seed and benchmark: the frozen target runs every test batch without a patch
(the baseline, stored and reused); each method proposes one patch per batch from that batch's
failure packet; the patch is rerun on the same task identities; the pair (baseline, patched) is
recorded per task. An invalid patch is no patch (patched = baseline, counted); an infrastructure
failure is reported separately and never retried until it turns positive.

Baselines in the same report: no patch; a fixed Self-Refine-style rule; and best-of-N for the
target with N matched to the target episodes the patch pipeline spent, the best attempt chosen by
the environment's own success signal (an upper reference: it peeks at the outcome).

Held-out transfer (the reference's held-out experiment): per evidence seed, sample a few failures
of the split, build one packet from them, let the engineer write one patch per benchmark, and apply
it to every other task of the split.
"""
from __future__ import annotations

import dataclasses
import glob
import os
import random
import time

from hr1_jax.eval.engineers import Proposal, response_for_patch
from hr1_jax.eval.results import MethodResult, PatchRecord, TaskPair
from hr1_jax.rollout.batches import baseline_metadata, read_results, run_batch
from hr1_jax.rollout.reward import (EVAL_FAILED, OK, RewardContext, prepare_patch, score_group, score_patch,
                                   target_tokens)
from hr1_jax.utils.jsonsafe import safe_str
from hr1_jax.utils.logging import log_event
from hr1_jax.utils.progress import map_in_chunks, progress

PROPOSE_CHUNK = 16   # rows per engineer call: engineer_responses decodes 16 at a time


@dataclasses.dataclass
class Batch:
    """One baseline batch of a (benchmark, seed): its episodes and, if it had failures, its RL row."""
    benchmark: str
    seed: int
    name: str
    episodes: list[dict]
    row: dict | None


def load_batches(config, root: str, benchmark: str, seed: int) -> list[Batch]:
    """The stored baseline batches under `root` with their prompt rows (batches without failures
    get no row: every method leaves them unpatched)."""
    from hr1_jax.rollout.rows import build_rows
    rows = {r["metadata"]["batch_tag"]: r for r in build_rows(config, root, benchmark)[0]}
    out = []
    for folder in sorted(glob.glob(os.path.join(root, benchmark, "batch_*"))):
        name = os.path.basename(folder)
        out.append(Batch(benchmark, seed, name, read_results(folder), rows.get(f"{benchmark}_{name}")))
    return out


def task_family(episode: dict) -> str:
    """The task family of an episode, as its benchmark's descriptor reads it ("" = none)."""
    from envs.registry import benchmark, names
    name = episode.get("benchmark")
    return benchmark(name).family_of(episode) if name in names() else ""


def _think(text: str) -> str:
    head = text.split("</think>", 1)[0] if "</think>" in text else ""
    return head.replace("<think>", "").strip()[:2000]


def evaluate_method(name: str, batches: list[Batch], proposals: dict[tuple, Proposal], ctx: RewardContext,
                    *, description: str = "") -> MethodResult:
    """Score one method's proposals (keyed by (benchmark, seed, batch name)) on their batches."""
    t0 = time.monotonic()
    method = MethodResult(name=name, description=description)
    todo = [(b, proposals[(b.benchmark, b.seed, b.name)]) for b in batches if b.row is not None]
    # Chunks of the reruns score_group runs at once, two in flight: the pool never drains, the bar moves.
    results = []
    if todo:
        results = map_in_chunks(lambda part: score_group([b.row for b, _ in part], [p.text for _, p in part], ctx),
                                todo, chunk=4 * ctx.pool.num_workers, in_flight=2, desc=f"eval {name}", unit="batch")
    by_batch = {(b.benchmark, b.seed, b.name): (p, r) for (b, p), r in zip(todo, results)}
    episodes_run = 0
    for b in batches:
        base = {str(ep["task_id"]): float(ep["reward"]) for ep in b.episodes}
        family = {str(ep["task_id"]): task_family(ep) for ep in b.episodes}
        proposal, res = by_batch.get((b.benchmark, b.seed, b.name), (None, None))
        if res is not None and res.eval_status == EVAL_FAILED:
            method.n_eval_failed += 1
            log_event("eval", "eval_failed", method=name, batch=b.name, reason=res.reason)
            continue  # reported as missing, never as 0
        patched = dict(base)
        if res is not None and res.eval_status == OK:
            patched.update(res.patched_rewards)
            episodes_run += 0 if res.cache_hit else res.batch_size
            method.cost["target_tokens"] = method.cost.get("target_tokens", 0) + (0 if res.cache_hit else res.target_tokens)
        elif res is not None:
            method.n_invalid += 1
        for tid in sorted(base, key=int):
            method.pairs.append(TaskPair(b.benchmark, int(tid), b.seed, b.name, base[tid], patched[tid], family[tid]))
        if proposal is not None:
            patch, _, reason = prepare_patch(proposal.text, b.benchmark, ctx.config)
            tau = float(ctx.config.rollout.reward_threshold)
            method.patches.append(PatchRecord(
                method=name, benchmark=b.benchmark, batch=b.name, seed=b.seed, valid=patch is not None,
                reason=reason or (f"delta {res.delta_average_reward:+.3f} on {res.batch_size} tasks" if res else ""),
                think=_think(proposal.text), patch=patch, hook_stats=res.hook_effects if res else {},
                rescued=sorted(int(t) for t in base if base[t] < tau <= patched[t]),
                regressed=sorted(int(t) for t in base if patched[t] < tau <= base[t])))
            method.cost["engineer_tokens"] = method.cost.get("engineer_tokens", 0) + proposal.engineer_tokens
    method.cost["target_episodes"] = episodes_run
    method.cost["wall_seconds"] = round(time.monotonic() - t0, 2)
    return method


def pipeline_episodes_per_task(method: MethodResult, batches: list[Batch]) -> float:
    """Target episodes the patch pipeline spent per task: the baseline run plus the reruns."""
    n_tasks = sum(len(b.episodes) for b in batches)
    return (n_tasks + method.cost.get("target_episodes", 0)) / max(1, n_tasks)


def best_of_n(batches: list[Batch], ctx: RewardContext, n: int, *, temperature: float) -> MethodResult:
    """The target alone, N attempts per task (the baseline is attempt 1), best by the env's signal."""
    t0 = time.monotonic()
    method = MethodResult(name=f"Best-of-{n} target (budget-matched)", upper_reference=True,
                          description="best attempt chosen by the environment's own success signal")
    target = dict(ctx.target)
    if target.get("kind") == "openai":
        target["temperature"] = temperature  # distinct attempts need sampling
    episodes_run, tokens = 0, 0
    for b in progress(batches, desc=f"eval best-of-{n}", unit="batch"):
        ids = [int(ep["task_id"]) for ep in b.episodes]
        best = {ep["task_id"]: float(ep["reward"]) for ep in b.episodes}
        failed = False
        for attempt in range(1, n):
            # Attempt seeds are disjoint from every evaluation seed (offset by 1000 per attempt).
            eps = run_batch(ctx.pool, b.benchmark, b.episodes[0]["split"], ids, target=target,
                            seed=b.seed + 1000 * attempt)
            episodes_run += len(eps)
            tokens += target_tokens(eps)
            if any(ep.get("reward") is None for ep in eps):
                failed = True
                break
            for ep in eps:
                best[ep["task_id"]] = max(best[ep["task_id"]], float(ep["reward"]))
        if failed:
            method.n_eval_failed += 1
            continue
        for ep in b.episodes:
            method.pairs.append(TaskPair(b.benchmark, int(ep["task_id"]), b.seed, b.name, float(ep["reward"]),
                                         best[ep["task_id"]], task_family(ep)))
    method.cost.update(target_episodes=episodes_run, target_tokens=tokens, wall_seconds=round(time.monotonic() - t0, 2))
    return method


def propose(engineer, batches: list[Batch], *, saved_dir: str = "", save_dir: str = "") -> dict[tuple, Proposal]:
    """Proposals for every batch with a row: from `saved_dir` (rerun saved patches, e.g. for a
    different target) or from the engineer; written to `save_dir` when given (generate-only)."""
    with_rows = [b for b in batches if b.row is not None]
    if saved_dir:
        out = {}
        for b in with_rows:
            path = os.path.join(saved_dir, b.benchmark, f"seed{b.seed}", f"{b.name}.txt")
            with open(path) as f:
                out[(b.benchmark, b.seed, b.name)] = Proposal(f.read())
        return out
    proposals = map_in_chunks(engineer.propose, [b.row for b in with_rows], chunk=PROPOSE_CHUNK,
                              desc=f"propose {engineer.name}", unit="row")
    out = {(b.benchmark, b.seed, b.name): p for b, p in zip(with_rows, proposals)}
    if save_dir:
        for b, p in zip(with_rows, proposals):
            path = os.path.join(save_dir, b.benchmark, f"seed{b.seed}", f"{b.name}.txt")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(safe_str(p.text))
    return out


def heldout_row(config, batches: list[Batch], evidence_ids: set[int], *, target_name: str) -> tuple[dict, dict]:
    """(evidence row, held-out row) for one benchmark: the evidence packet is built from the sampled
    failures only; the held-out row's metadata covers every other task (for `score_patch`)."""
    from hr1_jax.rollout.rows import engineer_row, packet_for
    from hr1_jax.runtime.episode import EpisodeResult

    bench, seed = batches[0].benchmark, batches[0].seed
    split = batches[0].episodes[0]["split"]
    tau = float(config.rollout.reward_threshold)
    all_eps = [ep for b in batches for ep in b.episodes]
    evidence = [ep for ep in all_eps if ep["task_id"] in evidence_ids]
    rest = [ep for ep in all_eps if ep["task_id"] not in evidence_ids]
    packet, _ = packet_for(config, bench, "heldout_evidence", [EpisodeResult.from_dict(ep) for ep in evidence],
                           threshold=tau, task_ids=sorted(evidence_ids), max_failures=len(evidence))
    meta = baseline_metadata(bench, split, seed, rest, target_name=target_name, threshold=tau)
    ev_meta = baseline_metadata(bench, split, seed, evidence, target_name=target_name, threshold=tau)
    return (engineer_row(config, bench, packet, dict(ev_meta, batch_tag=f"{bench}_evidence_seed{seed}")),
            engineer_row(config, bench, packet, dict(meta, batch_tag=f"{bench}_heldout_seed{seed}")))


def sample_evidence(batches: list[Batch], k: int, seed: int, threshold: float) -> set[int]:
    failures = sorted(ep["task_id"] for b in batches for ep in b.episodes if float(ep["reward"]) < threshold)
    return set(random.Random(seed).sample(failures, min(k, len(failures))))


def heldout_transfer(name: str, engineer, batches_by_bench: dict[str, list[Batch]], ctx: RewardContext,
                     *, evidence_k: int, evidence_seed: int) -> MethodResult:
    """One patch per benchmark from `evidence_k` sampled failures, applied to all other tasks."""
    t0 = time.monotonic()
    config = ctx.config
    method = MethodResult(name=name, description=f"held-out transfer, {evidence_k} evidence failures")
    tau = float(config.rollout.reward_threshold)
    for bench, batches in progress(sorted(batches_by_bench.items()), desc=f"eval {name}", unit="benchmark"):
        evidence = sample_evidence(batches, evidence_k, evidence_seed, tau)
        if not evidence:
            continue
        ev_row, ho_row = heldout_row(config, batches, evidence, target_name=ctx.target.get("name", ""))
        proposal = engineer.propose([ev_row])[0]
        patch, status, reason = prepare_patch(proposal.text, bench, config)
        res = score_patch(patch, ho_row, ctx) if patch is not None else None
        if res is not None and res.eval_status == EVAL_FAILED:
            method.n_eval_failed += 1
            continue
        base = {str(k): float(v) for k, v in ho_row["metadata"]["baseline_rewards"].items()}
        family = {str(ep["task_id"]): task_family(ep) for b in batches for ep in b.episodes}
        patched = dict(base, **(res.patched_rewards if res is not None else {}))
        method.n_invalid += patch is None
        seed = batches[0].seed
        for tid in sorted(base, key=int):
            method.pairs.append(TaskPair(bench, int(tid), seed, "heldout", base[tid], patched[tid], family[tid]))
        method.patches.append(PatchRecord(
            method=name, benchmark=bench, batch=f"heldout (evidence {sorted(evidence)})", seed=seed,
            valid=patch is not None, reason=reason, think=_think(proposal.text), patch=patch,
            hook_stats=res.hook_effects if res else {},
            rescued=sorted(int(t) for t in base if base[t] < tau <= patched[t]),
            regressed=sorted(int(t) for t in base if patched[t] < tau <= base[t])))
        method.cost["target_episodes"] = method.cost.get("target_episodes", 0) + (
            0 if res is None or res.cache_hit else res.batch_size)
        method.cost["engineer_tokens"] = method.cost.get("engineer_tokens", 0) + proposal.engineer_tokens
        method.cost["target_tokens"] = method.cost.get("target_tokens", 0) + (
            0 if res is None or res.cache_hit else res.target_tokens)
    method.cost["wall_seconds"] = round(time.monotonic() - t0, 2)
    return method


# ----------------------------------------------------------------------------------------------
# lifecycle ablation

def without_site(patch: dict, site: str) -> dict | None:
    """`patch` with every hook of one lifecycle site removed (the runtime never calls that site);
    None when nothing is left (the patch is then no patch)."""
    kept = [a for a in patch["actions"] if not (a.get("type") == "add_code_hook" and a.get("hook") == site)]
    return dict(patch, actions=kept) if kept else None


def ablate_method(full: MethodResult, batches: list[Batch], ctx: RewardContext, site: str) -> MethodResult:
    """`full`'s patches rerun on the same batches with `site` disabled. A patch without hooks at
    `site` is the same patch (its rerun is a cache hit); a full patch that was invalid stays no patch."""
    protocol = ctx.config.patch_protocol.response_protocol
    records = {(p.benchmark, p.seed, p.batch): p for p in full.patches}
    proposals = {}
    for b in batches:
        rec = records.get((b.benchmark, b.seed, b.name))
        if b.row is None or rec is None:
            continue
        patch = without_site(rec.patch, site) if rec.valid and rec.patch else None
        proposals[(b.benchmark, b.seed, b.name)] = Proposal(response_for_patch(patch, rec.think, protocol) if patch else "")
    name = f"{full.name} w/o {site}"
    method = evaluate_method(name, [b for b in batches if (b.benchmark, b.seed, b.name) in proposals or b.row is None],
                             proposals, ctx, description=f"{full.name} with its {site} hooks disabled")
    method.ablation_of, method.ablated_site = full.name, site
    method.n_invalid, method.patches = full.n_invalid, []   # the full patch's validity; views stay with it
    return method
