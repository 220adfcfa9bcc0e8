"""Tokenizers: the embedded SentencePiece model, training a new one, and an offline HF tokenizer."""
import pytest

from hr1_jax.models import tokenizer as tk

CODE = ('def on_post_step(state, obs):\n    if "Error" in obs:\t# retry\n        return {"hint": "é 中文 🙂"}\n'
        '\n\n    return None  \n')


@pytest.fixture(scope="module")
def spm_tok():
    return tk.load_tokenizer()  # "" -> embedded project model


def test_embedded_spm_round_trips_code_and_keeps_specials_whole(spm_tok):
    assert isinstance(spm_tok, tk.SentencePieceTokenizer)
    assert spm_tok.vocab_size == 2048
    ids = spm_tok.encode(CODE)
    assert spm_tok.decode(ids) == CODE  # whitespace, tabs, emoji (byte fallback) survive
    for special in tk.SPECIAL_TOKENS:
        sid = spm_tok.token_to_id(special)
        assert sid is not None and sid in spm_tok.encode(f"a{special}b")
        assert spm_tok.encode(special) == [sid]
    assert spm_tok.eos_id == spm_tok.token_to_id(tk.IM_END)
    assert spm_tok.eos_id in spm_tok.stop_ids and spm_tok.pad_id == 0
    # skip_special drops chat markers only
    text = f"{tk.IM_START}user\nhi{tk.IM_END}"
    assert spm_tok.decode(spm_tok.encode(text), skip_special=True) == "user\nhi"


def test_decode_drops_ids_that_name_no_token(spm_tok):
    # A model's padded vocabulary rows (ids >= vocab_size) and negative ids decode to nothing.
    ids = spm_tok.encode("hi there")
    stray = [-1, spm_tok.vocab_size, spm_tok.vocab_size + 100]
    assert spm_tok.decode(stray[:1] + ids + stray[1:]) == "hi there"
    assert spm_tok.decode(stray) == ""


def test_chat_template_qwen_format(spm_tok):
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    think = spm_tok.apply_chat_template(msgs, add_generation_prompt=True, enable_thinking=True)
    assert think == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<think>\n"
    nothink = spm_tok.apply_chat_template(msgs, enable_thinking=False)
    assert nothink.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert spm_tok.apply_chat_template(msgs, add_generation_prompt=False).endswith("U<|im_end|>\n")
    ids = spm_tok.apply_chat_template(msgs, tokenize=True)
    assert spm_tok.decode(ids) == think
    with pytest.raises(ValueError, match="bad chat message"):
        spm_tok.apply_chat_template([{"role": "robot", "content": "x"}])


def test_train_sentencepiece_writes_usable_model(tmp_path):
    texts = [CODE, "select name from users where id = 42;", "i want a red cotton shirt under 30 dollars"] * 20
    proto = tk.train_sentencepiece(texts, tmp_path / "tiny", vocab_size=400)
    assert (tmp_path / "tiny.model").read_bytes() == proto
    tok = tk.load_tokenizer(str(tmp_path / "tiny.model"))
    assert tok.vocab_size == 400
    assert tok.decode(tok.encode("<patch>\nx = 1\n</patch>")) == "<patch>\nx = 1\n</patch>"
    assert tok.encode("<patch>")[0] == tok.token_to_id("<patch>")
    with pytest.raises(ValueError, match="empty corpus"):
        tk.train_sentencepiece([], None)


def test_missing_tokenizer_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        tk.load_tokenizer(str(tmp_path / "nope.model"))
    with pytest.raises(FileNotFoundError):
        tk.load_tokenizer(str(tmp_path / "nope.bin"))


ADDED = "<|added|>"


def _save_hf_tokenizer(path, with_template):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
    raw.train_from_iterator([CODE, "hello world"] * 10, trainers.BpeTrainer(
        vocab_size=300, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.add_tokens([ADDED])  # an id past the base vocabulary, as checkpoints' added tokens are
    if with_template:
        # Marker text proves the checkpoint's own template (not ours) was used.
        fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                              "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                              "{% if enable_thinking is defined and not enable_thinking %}NOTHINK{% endif %}{% endif %}")
    fast.save_pretrained(path)


def test_hf_tokenizer_offline_with_and_without_template(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _save_hf_tokenizer(tmp_path / "a", with_template=True)
    tok = tk.load_tokenizer(str(tmp_path / "a"))
    assert isinstance(tok, tk.HFTokenizer)
    assert tok.decode(tok.encode(CODE)) == CODE
    assert tok.eos_id == tok.token_to_id("<|im_end|>") and tok.pad_id == tok.token_to_id("<|endoftext|>")
    assert set(tok.stop_ids) == {tok.eos_id, tok.pad_id}
    added = tok.token_to_id(ADDED)
    assert added >= tok.tok.vocab_size and tok.vocab_size == added + 1  # added tokens are valid ids
    assert tok.decode([-1] + tok.encode("hello") + [added, tok.vocab_size]) == "hello" + ADDED
    msgs = [{"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(msgs, enable_thinking=False).endswith("assistant\nNOTHINK")
    ids = tok.apply_chat_template(msgs, tokenize=True)
    assert isinstance(ids, list) and tok.decode(ids) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"

    _save_hf_tokenizer(tmp_path / "b", with_template=False)
    tok_b = tk.load_tokenizer(str(tmp_path / "b"))
    assert tok_b.apply_chat_template(msgs) == tk.format_chat(msgs)  # falls back to the Qwen format
