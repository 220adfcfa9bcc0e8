"""The 25 shipped reference patches validate, compile and round-trip through both protocols;
the demo guard replays as the reference demo says (spec §10)."""
import json

import pytest

from hr1_jax.patch import (PROTOCOLS, PatchError, build_response, compile_patch, normalize_patch,
                           parse_response, run_hook)

from tests.patch.refdata import REF, reference_patch_files

FILES = reference_patch_files()


def test_reference_patch_inventory():
    rel = [str(p.relative_to(REF)) for p in FILES]
    by_editor = {e: sum(f"/{e}/" in r for r in rel) for e in ("harness-r1", "qwen3.5-397b", "deepseek-v4-pro")}
    assert by_editor == {"harness-r1": 9, "qwen3.5-397b": 8, "deepseek-v4-pro": 6}
    assert "examples/webshop_patch.json" in rel and "demo/artifacts/patch.json" in rel
    assert len(FILES) == 25


def test_results_json_agrees_with_shipped_hooks():
    results = json.loads((REF / "examples/heldout_generalization/results.json").read_text())
    checked = 0
    for editor in results["editors"].values() if isinstance(results["editors"], dict) else results["editors"]:
        for entry in _walk_entries(editor):
            if entry.get("valid") and entry.get("patch_file"):
                patch = json.loads((REF / "examples/heldout_generalization" / entry["patch_file"]).read_text())
                norm = normalize_patch(patch, patch["benchmark"])
                assert [a["hook"] for a in norm["actions"]] == entry["hooks"]
                checked += 1
    assert checked == 23


def _walk_entries(node):
    if isinstance(node, dict):
        if "patch_file" in node:
            yield node
        for v in node.values():
            yield from _walk_entries(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk_entries(v)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REF)))
def test_reference_patch_validates_compiles_and_roundtrips(path):
    raw = json.loads(path.read_text(encoding="utf-8"))
    bench = raw["benchmark"]
    norm = normalize_patch(raw, bench)
    assert norm["schema_version"] == "harness-r1-patch-v1" and norm["benchmark"] == bench
    assert [a["code"] for a in norm["actions"]] == [a["code"] for a in raw["actions"]]
    compiled = compile_patch(raw, bench)
    assert sum(len(v) for v in compiled.hooks.values()) == len(raw["actions"])
    for protocol in PROTOCOLS:
        assert parse_response(build_response(raw, protocol), bench, protocol) == norm
    # A response with chat-template residue in front still parses to the same patch.
    residue = "<|im_start|>user\nsome prompt {\"actions\": []}<|im_end|>\n<|im_start|>assistant\n"
    assert parse_response(residue + build_response(raw, "prefill_think_patch"), bench, "prefill_think_patch") == norm


def test_reference_hooks_run_on_minimal_ctx_without_crashing_the_host():
    # Every reference hook runs on an empty ctx: each outcome is a contained status.
    for path in FILES:
        raw = json.loads(path.read_text(encoding="utf-8"))
        compiled = compile_patch(raw, raw["benchmark"])
        nb = {}
        for name in compiled.hooks:
            for outcome in compiled.call(name, {"admissible": []}, nb):
                assert outcome.status in ("ok", "none", "error", "invalid_return"), (path, outcome)


def test_example_patch_is_code_hook_only_with_two_hooks():
    raw = json.loads((REF / "examples/webshop_patch.json").read_text())
    norm = normalize_patch(raw, "webshop")
    assert [a["hook"] for a in norm["actions"]] == ["on_init", "make_pre_hint"]
    compiled = compile_patch(raw, "webshop")
    nb = {}
    init = compiled.call("on_init", {"observation": "WebShop"}, nb)
    assert init[0].status == "ok" and init[0].result["skills"][0]["id"] == "code_hook_skill"
    assert nb["stage"] == "search"


def test_legacy_skill_patch_normalises_but_fails_code_hook_only():
    legacy = {"benchmark": "webshop", "description": "tips",
              "actions": [{"type": "add_or_edit_skill", "skill_id": "buy.check", "text": "Check options."}]}
    norm = normalize_patch(legacy, "webshop", require_code_hook_only=False)
    assert norm["actions"][0]["skill_id"] == "buy.check"
    with pytest.raises(PatchError) as e:
        normalize_patch(legacy, "webshop")
    assert e.value.code == "not_code_hook_only"


EXPECT_KIND = {"block_and_prompt": "block_and_prompt", "rewrite_action": "rewrite_action", "no intervention": None}


def test_demo_replay_states(replay_states):
    patch = json.loads((REF / "demo/artifacts/patch.json").read_text())
    compiled = compile_patch(patch, "webshop")
    (fn,) = compiled.hooks["on_before_action"]
    seen = []
    for scenario in replay_states["scenarios"]:
        result = run_hook(fn, scenario["ctx"], {}, "on_before_action")
        kind = result["kind"] if result else None
        assert kind == EXPECT_KIND[scenario["expect"]], scenario["id"]
        seen.append((scenario["id"], kind, (result or {}).get("action")))
    assert seen == [("task-85-missing-flavor", "block_and_prompt", None),
                    ("task-83-unselected-options", "rewrite_action", "gray"),
                    ("task-83-options-selected", None, None)]
