"""An endpoint teacher behind a strict (hosted-style) loopback server, through `build_sft_rows`:
its reply is rerun for real (DBBench on SQLite, scripted target) and the SFT row keeps the
cleaned reasoning and the re-serialised patch, never the teacher's raw layout."""
from hr1_jax.agents.openai_server import LoopbackOpenAIServer
from hr1_jax.config import base_config
from hr1_jax.data.rows import rl_row
from hr1_jax.patch.parse import extract_response_json
from hr1_jax.rollout.batches import baseline_metadata, run_batch
from hr1_jax.rollout.packets import failure_packet
from hr1_jax.rollout.reward import RewardContext
from hr1_jax.runtime.episode import EpisodeResult
from hr1_jax.train.compact import SYSTEM, compact_user
from hr1_jax.train.teacher import EndpointTeacher, build_sft_rows
from hr1_jax.train.teacher.programs import module_names, render_response
from hr1_jax.train.teacher.signals import detect

MESSY = "<think>\nThe agent commits `early`.\n```sql\nSELECT 1;\n```\n{\"draft\": {\"hook\": 1}}\n"


class FrontierStandIn:
    """Answers with a real library program, wrapped in the layout a frontier model might use."""

    def chat(self, messages, tools):
        return {"content": MESSY + render_response("dbbench", module_names("dbbench"))}


def test_endpoint_teacher_rows_are_rerun_and_cleaned(tmp_path):
    config = base_config()
    config.dbbench.backend = "sqlite"
    config.rollout.num_workers = 1
    ids = [0, 1, 2, 3, 4]
    with RewardContext(config, cache_dir=str(tmp_path / "cache")) as ctx, \
            LoopbackOpenAIServer(lambda m: FrontierStandIn(), strict=True) as srv:
        eps = run_batch(ctx.pool, "dbbench", "dev", ids, target=config.target.to_dict(), seed=0)
        meta = baseline_metadata("dbbench", "dev", 0, eps, target_name=config.target.name)
        packet, _ = failure_packet("dbbench", "batch_000", [EpisodeResult.from_dict(ep) for ep in eps], task_ids=ids)
        meta = dict(meta, batch_tag="endpoint_teacher_test", packet_signals=detect("dbbench", packet))
        row = rl_row(SYSTEM, compact_user("dbbench", meta["packet_signals"], meta["baseline_pass"], len(ids)), meta)
        kept, stats = build_sft_rows([row], EndpointTeacher(srv.base_url, "frontier", retries=0), ctx,
                                     min_delta=-1.0)
    assert stats["candidates"] == 1 and stats["invalid"] == 0 and stats["eval_failed"] == 0
    assert len(kept) == 1 and ctx.counters["evaluations"] == 1
    text = kept[0]["messages"][-1]["content"]
    think = text.split("</think>")[0]
    assert think.startswith("The agent commits early.") and not any(c in think for c in "`{}")
    assert extract_response_json(text, "prefill_think_patch")["benchmark"] == "dbbench"
    assert srv.requests[0]["messages"] == row["prompt"]   # a hosted API gets no prefill
