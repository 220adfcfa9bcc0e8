"""Task identities, failure packets, row grouping and the grain JSONL source."""
import copy
import json

import pytest

from hr1_jax.data.rows import group_rows, read_jsonl, rl_row, rows_dataset, sft_assistant_text, write_jsonl
from hr1_jax.rollout.batches import baseline_metadata
from hr1_jax.rollout.identity import IdentityError, assert_rerun_matches, check_batch_identity, check_manifest
from hr1_jax.rollout.packets import failure_packet, sanitise, select, trace_packet, trim, TraceCase
from hr1_jax.runtime import EpisodeResult, run_episode
from toy_env import CounterAgent, CounterEnv


def episodes(ids, seed=0, env=None, overshoot=True):
    env = env or CounterEnv()
    tasks = env.tasks("test")
    return [run_episode(env, CounterAgent(tasks[i], overshoot=overshoot), tasks[i], seed=seed).to_dict() for i in ids]


def test_identity_round_trip_and_every_tampering_is_caught():
    eps = episodes(range(4))
    meta = baseline_metadata("counter", "test", 0, eps, target_name="t")
    ident = meta["identity"]
    check_batch_identity(ident, [0, 1, 2, 3])
    assert_rerun_matches(ident, episodes(range(4)))
    with pytest.raises(IdentityError, match="task 2"):  # a different task under the same id
        swapped = episodes([0, 1, 5, 3])
        swapped[2]["task_id"] = 2
        swapped[2]["identity"] = dict(swapped[2]["identity"], task_id=2)
        assert_rerun_matches(ident, swapped)
    with pytest.raises(IdentityError, match="does not recompute"):  # manifest edited in place
        bad = episodes(range(4))
        bad[1]["identity"]["payload_sha256"] = "0" * 64
        assert_rerun_matches(ident, bad)
    with pytest.raises(IdentityError, match="seed"):
        assert_rerun_matches(ident, episodes(range(4), seed=1))
    with pytest.raises(IdentityError, match="missing"):
        assert_rerun_matches(ident, episodes(range(3)))
    with pytest.raises(IdentityError, match="covers tasks"):
        check_batch_identity(ident, [0, 1, 2, 9])
    forged = copy.deepcopy(ident)
    forged["task_manifests"]["3"] = forged["task_manifests"]["0"]
    with pytest.raises(IdentityError, match="batch digest"):
        check_batch_identity(forged)


def test_a_remembered_manifest_digest_never_stands_for_a_different_body():
    manifest = episodes([0])[0]["identity"]
    assert check_manifest(manifest) == check_manifest(dict(manifest)) == manifest["sha256"]  # the second is remembered
    # Equal under `==` but not the same canonical JSON: each must be hashed, not matched to the memo.
    for seed in (float(manifest["seed"]), bool(manifest["seed"])):
        with pytest.raises(IdentityError, match="does not recompute"):
            check_manifest(dict(manifest, seed=seed))

    class Seed(int):   # marshal refuses a subclass: hashed every time, never remembered
        pass
    assert check_manifest(dict(manifest, seed=Seed(manifest["seed"]))) == manifest["sha256"]
    reordered = dict(reversed(list(manifest.items())))   # another key order: the same canonical digest
    assert check_manifest(reordered) == manifest["sha256"]


def test_trim_sanitise_and_selection():
    assert sanitise("see B07XYZ1234 at /mnt/data/x and /home/u/y") == "see [PRODUCT_ID] at [PATH] and [PATH]"
    t = trim("a" * 50 + "\n\n\n\n" + "b" * 50, 20)
    assert t.startswith("a" * 10) and t.endswith("b" * 10) and "...[middle truncated]..." in t
    cases = [TraceCase(i, b, r, "s", []) for i, b, r in [(0, 0, 0.5), (1, 0, 0.0), (10, 1, 0.2), (11, 1, 0.9)]]
    assert [c.index for c in select(cases, "round_robin", 3)] == [1, 10, 0]
    assert [c.index for c in select(cases, "lowest_reward", 2)] == [1, 10]


def records(ids, **kw):
    return [EpisodeResult.from_dict(ep) for ep in episodes(ids, **kw)]


def test_trace_packet_has_signals_transcript_and_respects_token_budget():
    eps = records(range(8))
    assert all(e.reward == 0.0 for e in eps)
    packet, n = trace_packet("alfworld", [(0, eps)], max_traces=5, max_obs_chars=350, max_assistant_chars=200,
                             max_approx_tokens=100000)
    assert n == 5 and packet.count("### Trace case") == 5
    assert "- final_reward: 0.0000" in packet and "ASSISTANT_TOOL: add {\"amount\": 1}" in packet
    assert "OBSERVATION: count=1" in packet and "total_actions:" in packet
    assert "sinkbasin 1" in packet  # the ALFWorld instruction forbids numbered instance ids
    small, n_small = trace_packet("alfworld", [(0, eps)], max_traces=5, max_approx_tokens=400)
    assert 1 <= n_small < 5 and f"Included traces: {n_small}" in small


def test_dbbench_evidence_packet():
    eps = records(range(6))
    text, n = failure_packet("dbbench", "batch_000", eps)   # the descriptor's own packet and cap (4)
    assert n == 4 and text.count("Trace index=") == 4 and "baseline pass: 0/6" in text
    assert "## Existing Batch Overview" in text and "ASSISTANT_TOOL add:" in text
    assert failure_packet("dbbench", "batch_000", eps, max_failures=6)[1] == 6
    cut, _ = failure_packet("dbbench", "batch_000", eps, limits={"max_evidence_chars": 300})
    assert cut.endswith("...[evidence truncated]") and len(cut) < 340


def _row(bench, i):
    meta = {"benchmark": bench, "split": "test", "seed": 0, "task_ids": [i], "baseline_rewards": {str(i): 0.0},
            "identity": {}, "reward_threshold": 1.0, "target_agent_name": "t"}
    return rl_row("sys", f"user {bench} {i}", meta)


def test_grouping_never_mixes_benchmarks_and_pads_tails(tmp_path):
    rows = {"dbbench": [_row("dbbench", i) for i in range(6)], "webshop": [_row("webshop", i) for i in range(8)]}
    out = group_rows(rows, 4, seed=20260621)
    assert len(out) == 16
    for g in range(4):
        assert len({r["metadata"]["benchmark"] for r in out[g * 4:(g + 1) * 4]}) == 1
    assert sum(bool(r["metadata"].get("mixed_padded_duplicate")) for r in out) == 2
    assert out == group_rows(rows, 4, seed=20260621)
    with pytest.raises(ValueError):
        group_rows(rows, 4, seed=1, tail="error")
    path = str(tmp_path / "rows.jsonl")
    write_jsonl(path, out)
    ds = rows_dataset(path)
    assert len(ds) == 16 and ds[3] == read_jsonl(path)[3]
    assert [r["metadata"]["mixed_index"] for r in ds.shuffle(seed=0)] != list(range(16))


def test_sft_assistant_text_protocols():
    patch = {"benchmark": "dbbench", "actions": []}
    pre = sft_assistant_text("- pattern", patch, "prefill_think_patch")
    assert not pre.startswith("<think>") and "</think>" in pre and pre.endswith("</patch>")
    full = sft_assistant_text("- pattern", patch, "full_think_patch")
    assert full.startswith("<think>\n- pattern\n</think>") and json.dumps(patch) in full


def test_summary_counts_and_webshop_substitute_note():
    from hr1_jax.rollout.batches import format_table, summarize
    from hr1_jax.rollout.pool import failed_episode
    eps = episodes(range(3), overshoot=False) + [failed_episode("counter", "test", 3, 0, "endpoint down")]
    s = summarize("counter", eps)
    assert (s["n_tasks"], s["n_scored"], s["infra_errors"], s["mean_reward"], s["success_rate"]) == (4, 3, 1, 1.0, 1.0)
    assert "note" not in s and "infra_errors=1" in format_table(eps, s)
    web = summarize("webshop", eps)
    assert "SUBSTITUTE" in web["note"] and "SUBSTITUTE" in format_table(eps, web)
