"""The teacher's SFT rows come from real reruns: every candidate is scored by the paired-rerun
reward (DBBench on SQLite, scripted target) and only the best with delta >= min_delta is kept
(keep="all": every candidate with delta >= min_delta)."""
import pytest

from hr1_jax.config import base_config
from hr1_jax.data.rows import rl_row
from hr1_jax.rollout.batches import baseline_metadata, run_batch
from hr1_jax.rollout.packets import failure_packet
from hr1_jax.rollout.reward import RewardContext
from hr1_jax.runtime.episode import EpisodeResult
from hr1_jax.train.compact import SYSTEM, compact_user
from hr1_jax.train.teacher import TemplateTeacher, build_sft_rows
from hr1_jax.train.teacher.signals import detect


def test_teacher_rows_are_rerun_filtered(tmp_path):
    config = base_config()
    config.dbbench.backend = "sqlite"
    config.rollout.num_workers = 1
    ids = [0, 1, 2, 3, 4, 5]
    with RewardContext(config, cache_dir=str(tmp_path / "cache")) as ctx:
        eps = run_batch(ctx.pool, "dbbench", "dev", ids, target=config.target.to_dict(), seed=0)
        meta = baseline_metadata("dbbench", "dev", 0, eps, target_name=config.target.name)
        packet, _ = failure_packet("dbbench", "batch_000", [EpisodeResult.from_dict(ep) for ep in eps], task_ids=ids)
        meta = dict(meta, batch_tag="teacher_test", packet_signals=detect("dbbench", packet))
        row = rl_row(SYSTEM, compact_user("dbbench", meta["packet_signals"], meta["baseline_pass"], len(ids)), meta)
        teacher = TemplateTeacher(max_candidates=3)
        n_cand = len(teacher.variants(row))
        kept, stats = build_sft_rows([row], teacher, ctx, min_delta=0.0)
        assert stats["candidates"] == n_cand and stats["invalid"] == 0 and stats["eval_failed"] == 0
        assert ctx.counters["evaluations"] == n_cand   # every distinct candidate really reran
        if kept:
            meta_k = kept[0]["metadata"]
            assert meta_k["teacher_score"] >= 0.0
            assert kept[0]["messages"][-1]["role"] == "assistant"
            assert not kept[0]["messages"][-1]["content"].startswith("<think>")
        # keep="all": one SFT row per qualifying candidate, the best among them; scores from the cache
        every, stats_all = build_sft_rows([row], teacher, ctx, min_delta=0.0, keep="all")
        n_ok = n_cand - stats_all["negative"]
        assert len(every) == stats_all["kept"] == n_ok and stats_all["rows_kept"] == (1 if n_ok else 0)
        assert len({r["messages"][-1]["content"] for r in every}) == n_ok
        if kept:
            assert max(r["metadata"]["teacher_score"] for r in every) == kept[0]["metadata"]["teacher_score"]
        # an impossible bar keeps nothing; the scores now come from the cache
        none, stats2 = build_sft_rows([row], teacher, ctx, min_delta=2.0)
        assert none == [] and stats2["negative"] == n_cand
        assert ctx.counters["evaluations"] == n_cand
