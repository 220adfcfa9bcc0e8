"""One prompt renderer: SFT trains on exactly the prompt tokens GRPO and eval sample from, for a
Qwen3-style and a Qwen3.5-style chat template (tests/fixtures/chat_templates) and, without a chat
template, the project's own format (`format_chat`)."""
from types import SimpleNamespace

import pytest

from fixtures.hf_engineer import save_tokenizer
from hr1_jax.data.rows import sft_row
from hr1_jax.models.tokenizer import format_chat, load_tokenizer
from hr1_jax.train.compact import SYSTEM, compact_user
from hr1_jax.train.data import prompt_ids, render_prompt, sft_example
from hr1_jax.train.evaluate import engineer_responses

# How each template alone opens the assistant turn with thinking on: Qwen3 leaves <think> to the model.
TEMPLATE_OPENINGS = {"qwen3": "<|im_start|>assistant\n", "qwen3_5": "<|im_start|>assistant\n<think>\n"}


def _rows() -> tuple[dict, dict]:
    """An RL row and the SFT row the teacher makes from it (user text with a trailing newline,
    which the Qwen3.5 template trims)."""
    user = compact_user("dbbench", {"sql_error": 3, "repeated_action": 2}, 2, 5) + "\n"
    rl = {"prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
          "metadata": {"benchmark": "dbbench"}}
    return rl, sft_row(rl, "The agent repeats failing SQL.", {"actions": []}, "prefill_think_patch")


class _RecordingSampler:
    def __init__(self):
        self.prompts = []

    def generate(self, prompts, **_):
        self.prompts += prompts
        return [SimpleNamespace(text="") for _ in prompts]


def _stage_prompts(tok) -> tuple[list[int], list[int], list[int]]:
    """The prompt tokens of one row as SFT trains on them, GRPO samples them and eval samples them."""
    rl, sft = _rows()
    example = sft_example(sft["messages"], tok)
    sampler = _RecordingSampler()
    engineer_responses(sampler, tok, [rl], max_new_tokens=1)
    return list(example["ids"][:example["n_prompt"]]), prompt_ids(tok, rl), list(sampler.prompts[0])


def _hf_tokenizer(path, template):
    save_tokenizer(path, template)
    return load_tokenizer(str(path))


@pytest.mark.parametrize("template", sorted(TEMPLATE_OPENINGS))
def test_sft_prompt_tokens_equal_grpo_and_eval_prompt_tokens(template, tmp_path):
    tok = _hf_tokenizer(tmp_path, template)
    rl, _ = _rows()
    assert tok.apply_chat_template(rl["prompt"]).endswith(TEMPLATE_OPENINGS[template])
    sft, grpo, evaluation = _stage_prompts(tok)
    assert sft == grpo == evaluation
    assert tok.decode(sft).endswith("<|im_start|>assistant\n<think>\n")   # the prefill protocol, both templates


@pytest.mark.parametrize("template", sorted(TEMPLATE_OPENINGS))
def test_sft_sequence_is_the_templates_own_rendering_of_the_conversation(template, tmp_path):
    """Prompt + trained reply, token for token, is how the checkpoint's chat template renders the
    whole conversation (so a chat server replaying it sees what the engineer was trained on)."""
    tok = _hf_tokenizer(tmp_path, template)
    _, sft = _rows()
    example = sft_example(sft["messages"], tok)
    full = tok.encode(tok.apply_chat_template(sft["messages"], add_generation_prompt=False))
    assert full[:len(example["ids"])] == list(example["ids"])


@pytest.mark.parametrize("kind", ["sentencepiece", "hf_without_template"])
def test_without_a_chat_template_every_stage_renders_format_chat(kind, tmp_path):
    tok = load_tokenizer() if kind == "sentencepiece" else _hf_tokenizer(tmp_path, None)
    rl, _ = _rows()
    sft, grpo, evaluation = _stage_prompts(tok)
    assert sft == grpo == evaluation == tok.encode(format_chat(rl["prompt"]))


def test_a_template_that_opens_the_reply_otherwise_is_an_error(tmp_path):
    tok = _hf_tokenizer(tmp_path, "qwen3")
    tok.tok.chat_template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                             "<|im_start|>assistant\n<think>\n\n</think>\n\n")   # ignores enable_thinking
    with pytest.raises(ValueError, match="prefill protocol"):
        render_prompt(tok, _rows()[0]["prompt"])
