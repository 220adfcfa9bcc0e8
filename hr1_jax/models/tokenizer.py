"""Tokenizers behind one interface: a checkpoint's HF tokenizer, or the project's SentencePiece model.

`Tokenizer` is what the sampler, trainers and data code use: `encode`, `decode`, special-token ids,
a Qwen-style `apply_chat_template` and `save` (a checkpoint carries its tokenizer). The HF path loads `transformers.AutoTokenizer` strictly
offline from a checkpoint folder (and uses that checkpoint's own chat template when it has one);
the SentencePiece path is the embedded default for randomly initialised engineers, trained by
`train_sentencepiece` on the project's own prompt/patch corpus with the chat special tokens as
single, never-split pieces and byte fallback (so any text round-trips exactly).

Usage as a script (rebuilds the embedded model from JSON/JSONL/text files):
    python -m hr1_jax.models.tokenizer --out hr1_jax/models/assets/engineer_spm FILE...
"""
from __future__ import annotations

import io
import json
import os
import pathlib
import shutil
from typing import Iterable, Sequence

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
PATCH_OPEN, PATCH_CLOSE = "<patch>", "</patch>"
ENDOFTEXT = "<|endoftext|>"
# Order fixes their ids in the SentencePiece vocab (after pad=0, unk=1, </s>=2).
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END, THINK_OPEN, THINK_CLOSE, PATCH_OPEN, PATCH_CLOSE,
                  "<tool_call>", "</tool_call>")

ASSETS = pathlib.Path(__file__).resolve().parent / "assets"
DEFAULT_SPM = ASSETS / "engineer_spm.model"
# What an HF tokenizer folder holds (copied as is into checkpoints and HF exports; the generation
# config rides along so an export serves as its source did).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json",
                   "added_tokens.json", "chat_template.jinja", "chat_template.json", "generation_config.json",
                   "tokenizer.model")
SPM_FILE = "engineer_spm.model"   # the project SentencePiece model inside a checkpoint folder


TOOLS_HEAD = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
              "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
              "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
              "\"arguments\": <args-json-object>}\n</tool_call>")
EMPTY_THINK = f"{THINK_OPEN}\n\n{THINK_CLOSE}\n\n"


def tools_block(tools: Sequence[dict]) -> str:
    """The tool schema as Qwen3's template appends it to the system message."""
    return TOOLS_HEAD + "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools) + TOOLS_TAIL


def tool_call_text(call: dict) -> str:
    """One structured tool call as the Hermes/Qwen3 `<tool_call>{json}</tool_call>` text."""
    fn = call.get("function") or {}
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            raise ValueError(f"tool call {fn.get('name')!r} has arguments that are not JSON: {args[:80]!r}") from None
    return (f'<tool_call>\n{{"name": {json.dumps(fn.get("name"), ensure_ascii=False)}, '
            f'"arguments": {json.dumps(args if args is not None else {}, ensure_ascii=False)}}}\n</tool_call>')


def _assistant_text(m: dict, enable_thinking: bool) -> str:
    content = m.get("content") or ""
    calls = [tool_call_text(c) for c in m.get("tool_calls") or []]
    body = content + "".join(("\n" if i or content else "") + c for i, c in enumerate(calls))
    # Thinking off: every assistant turn carries the empty think block the generation prompt opens.
    head = EMPTY_THINK if not enable_thinking and THINK_OPEN not in content else ""
    return f"{IM_START}assistant\n{head}{body}{IM_END}\n"


def format_chat(messages: Sequence[dict], add_generation_prompt: bool = True,
                enable_thinking: bool = True, tools: Sequence[dict] | None = None) -> str:
    """Qwen chat text: `<|im_start|>{role}\\n{content}<|im_end|>\\n` per message.

    With `add_generation_prompt` the assistant turn is opened; with `enable_thinking` it is
    pre-filled with `<think>\\n` (the model continues its reasoning), otherwise with an empty think
    block `<think>\\n\\n</think>\\n\\n` as Qwen3's template does for non-thinking mode (and then
    every assistant turn of the history carries that block too, so a conversation's rendering is a
    prefix of its continuation's). Agent conversations follow Qwen3's tool format: `tools` appended
    to the system message, assistant `tool_calls` as `<tool_call>{json}</tool_call>`, consecutive
    `tool` messages as `<tool_response>` blocks of one user turn.
    """
    messages = list(messages)
    if tools and (not messages or messages[0].get("role") != "system"):
        messages.insert(0, {"role": "system", "content": ""})
    parts = []
    for i, m in enumerate(messages):
        role, content = m.get("role"), m.get("content")
        if role == "assistant" and content is None and m.get("tool_calls"):
            content = ""
        if role not in ("system", "user", "assistant", "tool") or not isinstance(content, str):
            raise ValueError(f"bad chat message {m!r}: need role in system/user/assistant/tool and str content")
        if role == "assistant":
            parts.append(_assistant_text(m, enable_thinking))
        elif role == "tool":
            prev, nxt = (messages[j].get("role") if 0 <= j < len(messages) else None for j in (i - 1, i + 1))
            parts.append((f"{IM_START}user" if prev != "tool" else "")
                         + f"\n<tool_response>\n{content}\n</tool_response>" + (f"{IM_END}\n" if nxt != "tool" else ""))
        else:
            extra = tools_block(tools) if role == "system" and i == 0 and tools else ""
            text = content + extra if content else extra.lstrip("\n")   # Qwen3: no blank lines before a bare tools block
            parts.append(f"{IM_START}{role}\n{text}{IM_END}\n")
    if add_generation_prompt:
        parts.append(f"{IM_START}assistant\n")
        parts.append(f"{THINK_OPEN}\n" if enable_thinking else EMPTY_THINK)
    return "".join(parts)


class Tokenizer:
    """Common interface. Subclasses set `vocab_size`, `eos_id`, `pad_id`, `stop_ids` and implement
    `encode`, `decode`, `token_to_id`.

    `vocab_size` counts the valid ids 0..vocab_size-1 (HF: `len(tokenizer)`, added tokens included).
    A model's vocabulary may be larger (padded rows); `decode` drops ids outside the valid range
    rather than raising, so decoding model output never fails.
    """

    source: str          # where it was loaded from (an HF folder or a .model file)
    kind: str            # "hf" | "sentencepiece"
    vocab_size: int      # number of valid ids; the sampler never draws an id at or above it
    eos_id: int          # end of an assistant turn (what generation stops on)
    pad_id: int
    stop_ids: tuple[int, ...]

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        raise NotImplementedError

    def token_to_id(self, token: str) -> int | None:
        raise NotImplementedError

    def save(self, folder: str | os.PathLike) -> None:
        """Write this tokenizer's files into `folder`, where `carried_tokenizer` finds them."""
        raise NotImplementedError

    @property
    def has_chat_template(self) -> bool:
        return False

    def _known_ids(self, ids: Iterable[int]) -> list[int]:
        """`ids` as ints without those that name no token (negative, or padded model rows)."""
        return [i for i in map(int, ids) if 0 <= i < self.vocab_size]

    def apply_chat_template(self, messages: Sequence[dict], add_generation_prompt: bool = True,
                            enable_thinking: bool = True, tokenize: bool = False,
                            tools: Sequence[dict] | None = None) -> str | list[int]:
        text = format_chat(messages, add_generation_prompt, enable_thinking, tools)
        return self.encode(text) if tokenize else text


class SentencePieceTokenizer(Tokenizer):
    def __init__(self, model: str | os.PathLike | bytes):
        import sentencepiece as spm

        self.kind = "sentencepiece"
        if isinstance(model, bytes):
            self.source = "<bytes>"
            self.sp = spm.SentencePieceProcessor(model_proto=model)
        else:
            if not pathlib.Path(model).is_file():
                raise FileNotFoundError(f"SentencePiece model not found: {model}")
            self.source = str(model)
            self.sp = spm.SentencePieceProcessor(model_file=str(model))
        self.vocab_size = self.sp.get_piece_size()
        ids = {t: self.sp.piece_to_id(t) for t in (IM_END, ENDOFTEXT)}
        missing = [t for t, i in ids.items() if i == self.sp.unk_id()]
        if missing:
            raise ValueError(f"SentencePiece model lacks special tokens {missing}; train it with "
                             "train_sentencepiece")
        self.eos_id = ids[IM_END]
        self.pad_id = self.sp.pad_id() if self.sp.pad_id() >= 0 else ids[ENDOFTEXT]
        self.stop_ids = tuple(sorted({ids[IM_END], ids[ENDOFTEXT], self.sp.eos_id()} - {-1}))
        self._special = {i for i in range(self.vocab_size)
                         if self.sp.is_control(i) or self.sp.id_to_piece(i) in SPECIAL_TOKENS}

    def encode(self, text: str) -> list[int]:
        return list(self.sp.encode(text))

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        ids = self._known_ids(ids)
        if skip_special:
            ids = [i for i in ids if i not in self._special]
        return self.sp.decode(ids)

    def token_to_id(self, token: str) -> int | None:
        i = self.sp.piece_to_id(token)
        return None if i == self.sp.unk_id() and token != self.sp.id_to_piece(i) else i

    def save(self, folder: str | os.PathLike) -> None:
        os.makedirs(folder, exist_ok=True)
        pathlib.Path(folder, SPM_FILE).write_bytes(self.sp.serialized_model_proto())


class HFTokenizer(Tokenizer):
    """`transformers.AutoTokenizer` loaded from a local checkpoint folder, never the network."""

    def __init__(self, path: str | os.PathLike):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoTokenizer

        if not pathlib.Path(path).is_dir():
            raise FileNotFoundError(f"tokenizer folder not found: {path}")
        self.kind, self.source = "hf", str(path)
        self.tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.vocab_size = len(self.tok)
        im_end = self.token_to_id(IM_END)
        eos = self.tok.eos_token_id
        self.eos_id = im_end if im_end is not None else eos
        if self.eos_id is None:
            raise ValueError(f"tokenizer at {path} has neither {IM_END} nor an eos token")
        pad = self.tok.pad_token_id
        self.pad_id = pad if pad is not None else self.eos_id
        self.stop_ids = tuple(sorted({i for i in (im_end, eos, self.token_to_id(ENDOFTEXT)) if i is not None}))

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        return self.tok.decode(self._known_ids(ids), skip_special_tokens=skip_special)

    def token_to_id(self, token: str) -> int | None:
        i = self.tok.convert_tokens_to_ids(token)
        return None if i is None or i == self.tok.unk_token_id else int(i)

    def save(self, folder: str | os.PathLike) -> None:
        # The source files byte for byte (not save_pretrained): an export serves exactly as its source.
        os.makedirs(folder, exist_ok=True)
        for name in TOKENIZER_FILES:
            src = os.path.join(self.source, name)
            if os.path.isfile(src):
                shutil.copyfile(src, os.path.join(folder, name))

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tok, "chat_template", None))

    def apply_chat_template(self, messages, add_generation_prompt=True, enable_thinking=True,
                            tokenize=False, tools=None):
        if not self.has_chat_template:
            return super().apply_chat_template(messages, add_generation_prompt, enable_thinking, tokenize, tools)
        # The checkpoint's own template is authoritative (Qwen3/3.5 read `enable_thinking`).
        # transformers needs jinja2 here (listed in setup.py); tokenize=False then encode ourselves
        # because tokenize=True returns a BatchEncoding in transformers 5.
        text = self.tok.apply_chat_template(_dict_arguments(messages), tokenize=False, tools=list(tools) if tools else None,
                                            add_generation_prompt=add_generation_prompt,
                                            enable_thinking=enable_thinking)
        return self.encode(text) if tokenize else text


def _dict_arguments(messages: Sequence[dict]) -> list[dict]:
    """Messages with tool-call arguments as objects: HF templates iterate them (Qwen3.5's XML
    format), while the OpenAI wire format carries them as JSON text."""
    out = []
    for m in messages:
        calls = m.get("tool_calls")
        if calls:
            m = dict(m, tool_calls=[dict(c, function=dict(c["function"], arguments=json.loads(a)))
                                    if isinstance(a := (c.get("function") or {}).get("arguments"), str) and a.strip()
                                    else c for c in calls])
        out.append(m)
    return out


def render_conversation(tokenizer: Tokenizer, messages: Sequence[dict], tools: Sequence[dict] | None = None,
                        enable_thinking: bool = False) -> tuple[list[int], list[int]]:
    """Token ids of a whole multi-turn conversation and a per-token mask: 1 on every assistant
    turn's tokens (content, tool calls, `<|im_end|>`), 0 elsewhere.

    Each assistant turn is cut out of the full rendering exactly where the generation prompt of its
    history ends, so training sees the tokens a server generates after `apply_chat_template(history,
    add_generation_prompt=True)`; every segment is encoded on its own, as a prompt and a completion
    are at inference. A chat template whose history rendering is not a prefix of the full rendering
    (e.g. one that drops earlier reasoning) cannot be trained this way: ValueError.
    """
    render = lambda msgs, gen: tokenizer.apply_chat_template(msgs, add_generation_prompt=gen,
                                                             enable_thinking=enable_thinking, tools=tools)
    full = render(messages, False)
    ids: list[int] = []
    mask: list[int] = []

    def add(text: str, on: int) -> None:
        piece = tokenizer.encode(text) if text else []
        ids.extend(piece)
        mask.extend([on] * len(piece))

    pos = 0
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        head = render(messages[:i], True) if i else ""
        if not i or not full.startswith(head) or len(head) < pos:
            raise ValueError(f"chat template of {tokenizer.source}: the generation prompt of turn {i} is not a "
                             "prefix of the conversation's rendering (or the conversation opens with an assistant "
                             "turn); multi-turn SFT needs a prefix-consistent template")
        end = full.find(IM_END, len(head))
        if end < 0:
            raise ValueError(f"chat template of {tokenizer.source}: assistant turn {i} does not end with {IM_END}")
        end += len(IM_END)
        add(full[pos:len(head)], 0)
        add(full[len(head):end], 1)
        pos = end
    add(full[pos:], 0)
    return ids, mask


def train_sentencepiece(texts: Iterable[str], out_prefix: str | os.PathLike | None = None,
                        vocab_size: int = 2048, model_type: str = "bpe",
                        extra_symbols: Sequence[str] = ()) -> bytes:
    """Train a SentencePiece model on `texts`; write `{out_prefix}.model` if given; return its bytes.

    Settings keep code intact: identity normalisation, no whitespace collapsing, no dummy prefix,
    newline as its own piece, digits split, and byte fallback so unseen characters round-trip.
    """
    import sentencepiece as spm

    texts = [t for t in texts if t]
    if not texts:
        raise ValueError("train_sentencepiece: empty corpus")
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=buf, vocab_size=vocab_size, model_type=model_type,
        byte_fallback=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=False, split_digits=True, allow_whitespace_only_pieces=True,
        user_defined_symbols=list(SPECIAL_TOKENS) + ["\n"] + list(extra_symbols),
        pad_id=0, unk_id=1, bos_id=-1, eos_id=2, max_sentence_length=1 << 20,
        hard_vocab_limit=False, minloglevel=2)
    proto = buf.getvalue()
    if out_prefix is not None:
        path = pathlib.Path(f"{out_prefix}.model")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(proto)
    return proto


def carried_tokenizer(folder: str) -> str:
    """The tokenizer a checkpoint folder carries, as a `load_tokenizer` spec ("" if none): the
    project SentencePiece file written by `save`, or the folder itself when it holds HF tokenizer files."""
    spm_path = os.path.join(folder, SPM_FILE)
    if os.path.isfile(spm_path):
        return spm_path
    if any(os.path.isfile(os.path.join(folder, name)) for name in ("tokenizer.json", "tokenizer_config.json")):
        return folder
    return ""


def load_tokenizer(spec: str = "") -> Tokenizer:
    """`model.tokenizer` semantics: a folder -> HF tokenizer; a `.model` file -> SentencePiece;
    "" -> the embedded project model (a restored checkpoint's own tokenizer is found by
    `carried_tokenizer`)."""
    if not spec:
        return SentencePieceTokenizer(DEFAULT_SPM)
    p = pathlib.Path(spec)
    if p.is_dir():
        return HFTokenizer(p)
    if p.suffix == ".model":
        return SentencePieceTokenizer(p)
    raise FileNotFoundError(f"tokenizer {spec!r}: expected an HF folder or a SentencePiece .model file")


def texts_from_files(paths: Iterable[str | os.PathLike]) -> list[str]:
    """Every string inside JSON / JSONL files (recursively), or whole text files otherwise."""
    out: list[str] = []

    def walk(o):
        if isinstance(o, str):
            out.append(o)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    for path in paths:
        p = pathlib.Path(path)
        text = p.read_text(encoding="utf-8")
        if p.suffix == ".json":
            walk(json.loads(text))
        elif p.suffix == ".jsonl":
            for line in text.splitlines():
                if line.strip():
                    walk(json.loads(line))
        else:
            out.append(text)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Train the project SentencePiece tokenizer.")
    ap.add_argument("--out", required=True, help="output prefix (writes PREFIX.model)")
    ap.add_argument("--vocab-size", type=int, default=2048)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    texts = texts_from_files(args.files)
    train_sentencepiece(texts, args.out, args.vocab_size)
    print(f"wrote {args.out}.model from {len(texts)} texts ({sum(map(len, texts))} chars)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
