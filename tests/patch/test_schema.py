"""normalize_patch limits and flags (reference spec §2.2 plus our opt-in checks)."""
import pytest

from envs import registry
from hr1_jax.config import ConfigError, base_config, validate_config
from hr1_jax.patch import PatchError, compile_patch, normalize_options, normalize_patch

HOOK = "def hook(ctx, nb):\n    return None"


def action(hook="make_pre_hint", code=HOOK):
    return {"type": "add_code_hook", "hook": hook, "code": code}


def p(actions=None, desc="General guard.", bench="webshop"):
    return {"benchmark": bench, "description": desc, "actions": [action()] if actions is None else actions}


def err(obj, bench="webshop", **kw):
    with pytest.raises(PatchError) as e:
        normalize_patch(obj, bench, **kw)
    return e.value.code


def test_normalised_shape_and_description_cleanup():
    out = normalize_patch({"benchmark": "WebShop", "description": "  two\n\tlines  ", "actions": [action(" on_init ")]})
    assert out == {"schema_version": "harness-r1-patch-v1", "benchmark": "webshop", "description": "two lines",
                   "actions": [{"type": "add_code_hook", "hook": "on_init", "code": HOOK}]}


def test_patch_benchmark_wins_and_argument_is_fallback():
    assert normalize_patch(p(bench="dbbench"), "webshop")["benchmark"] == "dbbench"
    no_bench = {"description": "", "actions": [action()]}
    assert normalize_patch(no_bench, "alfworld")["benchmark"] == "alfworld"
    assert err(no_bench, None) == "bad_benchmark"


def test_action_count_limits():
    assert err(p([])) == "no_actions"
    assert err({"benchmark": "webshop", "actions": "x"}) == "no_actions"
    assert len(normalize_patch(p([action()] * 12))["actions"]) == 12
    assert err(p([action()] * 13)) == "too_many_actions"
    assert err("not a dict") == "not_object"


def test_description_limits_and_leakage():
    assert normalize_patch(p(desc="x" * 900))["description"] == "x" * 900
    assert err(p(desc="x" * 901)) == "text_too_long"
    for leak in ("Fixes B07XYZ1234 style items", "as in task 12", "index #3 fails", "sample 77",
                 "webshop_123 trace", "alfworld-9 case"):
        assert err(p(desc=leak)) == "leakage", leak
    assert normalize_patch(p(desc="Avoid repeating task steps."))["description"]


def test_code_limits_and_hook_names():
    assert err(p([action(code="")])) == "empty_code"
    assert err(p([action(code="# pad\n" * 1400 + HOOK)])) == "code_too_long"
    assert err(p([action(hook="on_step")])) == "bad_hook_name"
    assert err(p([{"type": "add_code_hook", "hook": "on_init", "code": 5}])) == "empty_code"
    assert err(p([{"type": "drop_table"}])) == "bad_action_type"
    assert err(p(["add_code_hook"])) == "bad_action"


def test_compile_errors_surface_with_codes():
    assert err(p([action(code="def hook(ctx, nb):\n    import os\n    return None")])) == "forbidden_syntax"
    assert err(p([action(code="import os\n" + HOOK)])) == "top_level"
    six = "".join(f"def h{i}():\n    return {i}\n" for i in range(6)) + HOOK
    with pytest.raises(PatchError) as e:
        normalize_patch(p([action(code=six)]), "webshop")
    assert e.value.code == "too_many_helpers" and "at most 5 helper functions" in e.value.message


def test_alfworld_literal_leak_is_benchmark_scoped():
    code = "def hook(ctx, nb):\n    return {'message': 'go to page 2'}"
    assert normalize_patch(p([action(code=code)], bench="webshop"))
    assert normalize_patch(p([action(code=code)], bench="dbbench"))
    assert err(p([action(code=code)], bench="alfworld"), "alfworld") == "alfworld_instance_leak"


def test_legacy_actions_and_runtime_noop():
    skill = {"type": "add_or_edit_skill", "skill_id": "s1", "text": "Select options first."}
    guard = {"type": "add_guard_rule", "rule_id": "g1", "condition": {"pred": "required_options_unselected"},
             "effect": {"kind": "block_and_prompt", "message": "Select options first."}}
    legacy = dict(require_code_hook_only=False)
    assert normalize_patch(p([skill, guard]), **legacy)["actions"][1]["effect"]["kind"] == "block_and_prompt"
    assert err(p([skill])) == "not_code_hook_only"
    # DBBench: a legacy-only patch does nothing at run time.
    db_skill = dict(skill)
    assert err(p([db_skill], bench="dbbench"), "dbbench", **legacy) == "runtime_noop"
    assert normalize_patch(p([db_skill], bench="dbbench"), "dbbench", reject_runtime_noop=False, **legacy)
    bad_guard = dict(guard, effect={"kind": "inject_hint", "message": "x"})
    assert err(p([bad_guard]), **legacy) == "bad_effect"
    alf_force = {"type": "add_guard_rule", "rule_id": "g2", "condition": {"pred": "remaining_steps_low"},
                 "effect": {"kind": "force_action", "action": "go to cabinet 3"}}
    assert err(p([alf_force], bench="alfworld"), "alfworld", **legacy) == "alfworld_instance_leak"
    assert err(p([dict(guard, condition={"eq": ["state.secret", 1]})]), **legacy) == "bad_condition"
    assert err(p([{"type": "set_config", "target": "h2", "value": True}]), **legacy) == "bad_config"
    assert normalize_patch(p([{"type": "set_config", "target": "webshop.price_tolerance", "value": 0.2}]),
                           **legacy)["actions"][0] == {"type": "set_config", "target": "price_tolerance", "value": 0.2}


def test_hook_once_and_code_budget_flags():
    twice = p([action(), action()])
    assert len(normalize_patch(twice)["actions"]) == 2  # reference behaviour: allowed
    assert err(twice, enforce_hook_once=True) == "duplicate_hook"
    big = "def hook(ctx, nb):\n    x = '" + "y" * 600 + "'\n    return None"
    three = p([action("on_init", big), action("make_pre_hint", big), action("on_post_step", big)])
    assert normalize_patch(three, max_total_code_chars=0)
    assert err(three, max_total_code_chars=1500) == "code_budget"
    assert normalize_patch(three, max_total_code_chars=3000)


def test_flags_from_config_section():
    c = base_config()
    c.patch_protocol.enforce_hook_once = True
    c.patch_protocol.max_total_code_chars = 9000
    validate_config(c)
    kw = normalize_options(c.patch_protocol)
    assert kw == {"require_code_hook_only": True, "reject_runtime_noop": True, "enforce_hook_once": True,
                  "max_total_code_chars": 9000}
    assert err(p([action(), action()]), **kw) == "duplicate_hook"
    with pytest.raises(PatchError):
        compile_patch(p([action(), action()]), "webshop", **kw)
    c.patch_protocol.max_total_code_chars = -1
    with pytest.raises(ConfigError, match="patch_protocol.max_total_code_chars"):
        validate_config(c)


def test_input_not_mutated():
    raw = p(desc="  spaced  ")
    normalize_patch(raw)
    assert raw["description"] == "  spaced  "


# --- benchmarks beyond the three: their PatchSpec's data, defaults where they declare nothing
TOY = ("counter", "toy_benchmark:BENCHMARK")
RULED = ("ruled", "ruled_benchmark:BENCHMARK")
PRESS_SLOT = 'def hook(ctx, nb):\n    return {"kind": "force_action", "action": "press  Slot 3"}'


def test_a_benchmark_without_rules_validates_from_defaults():
    with registry.registered(*TOY):
        assert normalize_patch(p(bench="counter"))["benchmark"] == "counter"
        # no instance rule of its own: the literal that ALFWorld rejects is fine here
        assert normalize_patch(p([action(code='def hook(ctx, nb):\n    return "go to cabinet 3"')], bench="counter"))
        # every registered benchmark's task-id patterns count as leakage in any patch
        assert err(p(desc="Fix what failed in webshop 12.", bench="counter"), "counter") == "leakage"
        legacy = {"type": "edit_tool_hint", "tool": "search_action", "text": "Search first."}
        assert err(p([legacy], bench="counter"), "counter", require_code_hook_only=False) == "bad_tool"


def test_a_benchmarks_patch_rules_are_its_descriptor_data():
    with registry.registered(*RULED):
        assert err(p([action(code=PRESS_SLOT)], bench="ruled"), "ruled") == "ruled_instance_leak"
        assert normalize_patch(p([action(code=PRESS_SLOT)], bench="alfworld"))   # its rule is its own
        assert err(p(desc="Handle game-7 better.", bench="webshop")) == "leakage"   # its id pattern, any patch
        hint = {"type": "add_recovery_rule", "rule_id": "r", "condition": {"eq": [1, 1]},
                "effect": {"kind": "force_action", "action": "press"}}
        assert err(p([hint], bench="ruled"), "ruled", require_code_hook_only=False) == "bad_effect"
        tool = {"type": "edit_tool_hint", "tool": "press", "text": "Press once."}
        assert err(p([tool], bench="ruled"), "ruled", require_code_hook_only=False) == "runtime_noop"
    assert normalize_patch(p(desc="Handle game-7 better."))   # unregistered: its pattern is gone
