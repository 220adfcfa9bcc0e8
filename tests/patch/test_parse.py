"""Response parsing (reference spec §1.7): both protocols, last patch block, JSON fallbacks."""
import json
import random
import re

import pytest

from hr1_jax.patch import PatchError, build_response, extract_patch_json, extract_response_json, parse_response
from hr1_jax.patch.parse import patch_blocks

HOOK = "def hook(ctx, nb):\n    return {'message': 'check the options'}"


def patch(desc="Soft hint before buying.", hook="make_pre_hint"):
    return {"benchmark": "webshop", "description": desc,
            "actions": [{"type": "add_code_hook", "hook": hook, "code": HOOK}]}


def block(p):
    return "<patch>\n" + json.dumps(p) + "\n</patch>"


def code_of(text, protocol="prefill_think_patch"):
    with pytest.raises(PatchError) as e:
        parse_response(text, "webshop", protocol)
    return e.value.code


def test_full_think_uses_last_patch_block():
    text = f"<think>\nfirst try\n</think>\n{block(patch('first'))}\nactually:\n{block(patch('second'))}"
    assert parse_response(text, "webshop", "full_think_patch")["description"] == "second"


def test_prefill_prepends_think_and_strips_assistant_residue():
    body = "reasoning\n</think>\n" + block(patch())
    assert parse_response(body, "webshop", "prefill_think_patch")["actions"][0]["hook"] == "make_pre_hint"
    rendered = "<|im_start|>system\nx<|im_end|>\n<|im_start|>assistant\n" + body
    assert parse_response(rendered, "webshop", "prefill_think_patch")["description"] == "Soft hint before buying."


def test_prefill_rejects_second_think_tag():
    assert code_of("<think>\nmore\n</think>\n" + block(patch())) == "nested_think"
    assert code_of("  <THINK> x </think>" + block(patch())) == "nested_think"


def test_full_think_requires_think_and_complete_patch():
    assert code_of(block(patch()), "full_think_patch") == "missing_think"
    assert code_of("<think>x</think>\n<patch>\n" + json.dumps(patch()), "full_think_patch") == "missing_patch"
    assert code_of("<think>x</think>\n<patch>  \n </patch>", "full_think_patch") == "empty_patch"
    assert code_of("reasoning without closing think " + block(patch())) == "missing_think"


def test_tags_are_case_insensitive():
    text = "<THINK>x</Think>\n<PATCH>" + json.dumps(patch()) + "</Patch>"
    assert parse_response(text, "webshop", "full_think_patch")["benchmark"] == "webshop"


def test_patch_blocks_are_what_the_lazy_block_pattern_captures():
    # patch_blocks replaced `<patch>\s*(.*?)\s*</patch>` (DOTALL, IGNORECASE) for speed: same bodies.
    pattern = re.compile(r"<patch>\s*(.*?)\s*</patch>", re.DOTALL | re.IGNORECASE)
    pieces = ["<patch>", "</patch>", "<PATCH>", "</Patch>", "<patch", "</", " ", "\n", "\u2003", "\t", "a", "{}", "<"]
    rng = random.Random(7)
    texts = ["", "<patch></patch>", "<patch> \n </patch>", "</patch><patch>x"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randrange(1, 14))) for _ in range(3000)]
    for text in texts:
        assert patch_blocks(text) == [m.group(1) for m in pattern.finditer(text)], text


def test_fenced_json_inside_patch_block():
    text = "x\n</think>\n<patch>\n```json\n" + json.dumps(patch()) + "\n```\n</patch>"
    assert parse_response(text, "webshop", "prefill_think_patch")["actions"][0]["code"] == HOOK


def test_patch_like_dict_preferred_over_later_plain_dict():
    text = "<patch>" + json.dumps(patch()) + ' trailing {"note": 1}</patch>'
    assert extract_patch_json(text)["benchmark"] == "webshop"
    assert extract_patch_json('noise {"a": 1} then {"b": 2}') == {"b": 2}


def test_extract_handles_unclosed_patch_and_no_json():
    assert extract_patch_json("<patch>\n" + json.dumps(patch()))["actions"]
    with pytest.raises(PatchError) as e:
        extract_patch_json("no json here at all")
    assert e.value.code == "no_json"
    assert code_of("x</think><patch>not json</patch>") == "no_json"


def test_bad_protocol_and_non_text():
    assert code_of("x</think>" + block(patch()), "json_patch") == "bad_protocol"
    with pytest.raises(PatchError):
        extract_response_json(None, "prefill_think_patch")


def test_invalid_patch_inside_valid_response_is_rejected_by_normalisation():
    bad = patch()
    bad["actions"][0]["code"] = "def hook(ctx, nb):\n    import os\n    return None"
    assert code_of("x</think>" + block(bad)) == "forbidden_syntax"


def test_build_response_roundtrip_both_protocols():
    for protocol in ("prefill_think_patch", "full_think_patch"):
        text = build_response(patch(), protocol)
        assert text.startswith("<think>") == (protocol == "full_think_patch")
        assert parse_response(text, "webshop", protocol)["description"] == "Soft hint before buying."


@pytest.mark.parametrize("body", ['{"a":' + "[" * 5000 + "]" * 5000 + "}",
                                  '{"benchmark":"webshop","description":"d","actions":' + "[" * 3000 + "]" * 3000 + "}",
                                  '{"a":' * 3000 + "1" + "}" * 3000])
def test_deeply_nested_json_is_a_patch_error_not_a_crash(body):
    with pytest.raises(PatchError):
        parse_response("x</think><patch>" + body + "</patch>", "webshop", "prefill_think_patch")
