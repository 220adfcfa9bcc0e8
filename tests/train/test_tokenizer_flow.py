"""A checkpoint carries its tokenizer through the documented stage sequence (README, launch/tpu_pod.sh):
`hr1 sft` from an HF folder with a real (Qwen3-style) chat template, `hr1 grpo` given only SFT's
final_params, `hr1 eval` of GRPO's final_params. Each stage's `tokenizer` event says which tokenizer
it ran with. A tokenizer with more ids than the model has rows, or a checkpoint without one, fails
at start-up."""
import filecmp
import json
import os
import subprocess
import sys

import pytest

from configs.default import get_config
from fixtures.dbbench_rows import dbbench_rl_rows
from fixtures.hf_engineer import MODEL_VOCAB, TEMPLATES, TOKENIZER_VOCAB, save_engineer, save_tokenizer
from hr1_jax.config import ConfigError
from hr1_jax.data.rows import sft_row, write_jsonl
from hr1_jax.train.engine import Engineer
from models.hf_fixtures import cached_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = '''
from hr1_jax.config import base_config

def get_config():
    c = base_config()
    c.dbbench.backend = "sqlite"
    c.rollout.num_workers = 1
    c.mesh.fsdp = 1
    c.train.logprob_chunk_size = 64
    c.train.checkpoint.async_save = False
    c.train.sft.update(dict(batch_size=1, grad_accum=1, epochs=1, max_seq_len=1024, buckets=(1024,)))
    c.train.grpo.update(dict(prompts_per_step=1, samples_per_prompt=2, global_batch=2, iterations=1, micro_batch=2,
                             num_steps=1, max_prompt_tokens=1024, max_response_tokens=8))
    c.eval.update(dict(benchmarks="dbbench", tasks="0:2", seeds="0", compare_teacher=False, fixed_editors="",
                       self_refine=False, best_of_n=False, heldout_evidence=0, max_new_tokens=8, generate_only=True))
    return c
'''


def _rows(tmp) -> tuple[str, str]:
    """RL rows from real DBBench baselines (SQLite, scripted target) and SFT rows made from them."""
    rl_rows = dbbench_rl_rows("flow")
    sft_rows = [sft_row(r, "The agent repeats failing SQL.", {"actions": []}, "prefill_think_patch") for r in rl_rows]
    write_jsonl(str(tmp / "rl.jsonl"), rl_rows)
    write_jsonl(str(tmp / "sft.jsonl"), sft_rows)
    return str(tmp / "rl.jsonl"), str(tmp / "sft.jsonl")


def _hr1(stage: str, config: str, workdir, *flags: str) -> list[dict]:
    """Run `python -m hr1_jax.cli STAGE` as the README documents it; its JSON events."""
    env = dict(os.environ, PYTHONPATH=REPO, HR1_PROGRESS="0", HR1_LOG_FORMAT="json",
               XLA_FLAGS="--xla_force_host_platform_device_count=1")
    cmd = [sys.executable, "-m", "hr1_jax.cli", stage, f"--config={config}", f"--workdir={workdir}", *flags]
    proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [json.loads(line[4:]) for line in proc.stderr.splitlines() if line.startswith("HR1 ")]


def _tokenizer_event(events: list[dict], stage: str) -> dict:
    (event,) = [e for e in events if e["event"] == "tokenizer" and e["stage"] == stage]
    return event


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flow")
    base = tmp / "Qwen3-tiny"
    save_engineer(base, "qwen3")
    rl, sft = _rows(tmp)
    (tmp / "cfg.py").write_text(CONFIG)
    cfg = str(tmp / "cfg.py")
    events = {
        "sft": _hr1("sft", cfg, tmp / "sft", f"--config.model.hf_checkpoint={base}", f"--config.train.sft_rows={sft}"),
        "grpo": _hr1("grpo", cfg, tmp / "grpo", f"--config.train.rows={rl}",
                     f"--config.train.init_checkpoint={tmp / 'sft' / 'final_params'}"),
        "eval": _hr1("eval", cfg, tmp / "eval", f"--config.eval.engineer={tmp / 'grpo' / 'final_params'}"),
    }
    return tmp, base, events


@pytest.mark.slow   # three stage processes (~1 min on 2 cores)
def test_each_stage_uses_the_tokenizer_its_checkpoint_carries(flow):
    tmp, base, events = flow
    sources = {"sft": base, "grpo": tmp / "sft" / "final_params", "eval": tmp / "grpo" / "final_params"}
    for stage, source in sources.items():
        event = _tokenizer_event(events[stage], stage)
        assert event["source"] == str(source), stage
        assert (event["kind"], event["vocab_size"], event["chat_template"]) == ("hf", TOKENIZER_VOCAB, True), stage
        # The Qwen3 template leaves <think> to the model; every stage's prompts still pre-fill it.
        assert event["prompt_end"].endswith("<|im_start|>assistant\n<think>\n"), stage
    assert list((tmp / "eval" / "responses").rglob("batch_*.txt"))   # eval sampled from the restored engineer


@pytest.mark.slow
def test_stage_outputs_carry_the_source_tokenizer_files(flow):
    tmp, base, _ = flow
    template = TEMPLATES / "qwen3.jinja"
    for stage in ("sft", "grpo"):
        for folder in ("final_params", "hf_export"):
            out = tmp / stage / folder
            assert filecmp.cmp(out / "tokenizer.json", base / "tokenizer.json", shallow=False), out
            assert (out / "chat_template.jinja").read_text() == template.read_text(), out


def test_more_tokenizer_ids_than_model_rows_fails_at_start_up(tmp_path):
    _, path = cached_checkpoint("qwen3_untied")   # 128 embedding rows
    save_tokenizer(tmp_path, "qwen3")              # 300 ids
    c = get_config()
    c.model.hf_checkpoint, c.model.tokenizer = path, str(tmp_path)
    with pytest.raises(ConfigError, match=f"{TOKENIZER_VOCAB} ids but the model .* has 128 embedding rows"):
        Engineer(c, stage="test")


def test_a_checkpoint_without_a_tokenizer_is_refused(tmp_path):
    _, path = cached_checkpoint("qwen3_untied")   # model files only
    c = get_config()
    c.train.init_checkpoint = path
    with pytest.raises(ConfigError, match="carries no tokenizer"):
        Engineer(c, stage="test")


def test_fewer_tokenizer_ids_than_model_rows_is_fine(tmp_path):
    save_engineer(tmp_path, "qwen3_5")
    c = get_config()
    c.train.init_checkpoint = str(tmp_path)
    engineer = Engineer(c, stage="test")
    assert engineer.tokenizer.vocab_size == TOKENIZER_VOCAB < engineer.cfg.vocab_size == MODEL_VOCAB
