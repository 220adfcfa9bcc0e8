"""run_hook / CompiledPatch semantics: §2.4 normalisation, nb persistence, outcomes, budgets."""
import pytest

from envs import registry
from hr1_jax.patch import (HookCompileError, HookOutcome, compile_hook, compile_patch, normalize_hook_result,
                           run_hook)


def hook(body):
    return compile_hook("def hook(ctx, nb):\n" + "\n".join("    " + ln for ln in body.split("\n")), "webshop")


def test_reference_code_runner_behaviour():
    fn = hook("nb['count'] = nb.get('count', 0) + 1\n"
              "if 'error' in str(ctx.observation).lower():\n"
              "    return {'message': 'Error seen ' + str(nb['count'])}\n"
              "return None")
    nb = {}
    assert run_hook(fn, {"observation": "ok"}, nb, "make_pre_hint") is None
    assert run_hook(fn, {"observation": "An ERROR"}, nb, "make_pre_hint") == {"message": "Error seen 2"}
    assert nb == {"count": 2}
    with pytest.raises(HookCompileError):
        compile_hook("def hook(ctx, nb):\n    return open('x')", "webshop")
    assert run_hook(hook("return {'kind': 'rewrite_action'}"), {}, {}, "on_before_action") is None
    assert compile_hook("def hook(ctx, nb):\n    return {'message': 'go to page 2'}", "webshop")
    with pytest.raises(HookCompileError):
        compile_hook("def hook(ctx, nb):\n    return {'message': 'go to page 2'}", "alfworld")


def test_unknown_hook_name_gives_none():
    assert run_hook(hook("return {'message': 'x'}"), {}, {}, "on_step") is None


def test_attribute_and_dict_reads_and_missing_attribute():
    fn = hook("return {'message': ctx.state.page_type + '/' + ctx['state']['page_type'] + str(isinstance(ctx, dict))}")
    assert run_hook(fn, {"state": {"page_type": "home"}}, {}, "make_pre_hint") == {"message": "home/homeTrue"}
    miss = hook("return {'message': ctx.nothing}")
    assert run_hook(miss, {}, {}, "make_pre_hint") is None


@pytest.mark.parametrize("name,ret,expected", [
    ("on_init", {"skills": [{"text": " a  b "}, "c", {"text": ""}, 5], "tool_hint": "t"},
     {"skills": [{"id": "code_hook_skill", "text": "a b", "trigger": "code_hook"},
                 {"id": "code_hook_skill", "text": "c", "trigger": "code_hook"}], "tool_hint": "t"}),
    ("on_init", {"skills": "not a list"}, None),
    ("make_pre_hint", {"message": "  hi\nthere "}, {"message": "hi there"}),
    ("make_pre_hint", {"message": 5}, None),
    ("on_before_action", {"kind": "block_and_prompt", "message": "stop"}, {"kind": "block_and_prompt", "message": "stop"}),
    ("on_before_action", {"kind": "block_and_prompt"}, None),
    ("on_before_action", {"kind": "inject_hint", "message": "x"}, None),
    ("on_before_action", {"kind": "rewrite_action", "action": "  Click[Buy  Now] "},
     {"kind": "rewrite_action", "action": "click[buy now]"}),
    ("on_before_action", {"kind": "force_action", "action": "go to cabinet 3"}, None),
    ("on_before_action", {"kind": "force_action", "action": "go to cabinet 1"},
     {"kind": "force_action", "action": "go to cabinet 1"}),
    ("on_post_step", {"kind": "force_action", "action": "", "message": "m"}, {"kind": "inject_hint", "message": "m"}),
    ("on_post_step", {"kind": "block_and_prompt", "message": "m"}, None),
    ("on_post_step", {"kind": "inject_hint", "message": "x" * 2000}, {"kind": "inject_hint", "message": "x" * 900}),
])
def test_return_normalisation(name, ret, expected):
    assert normalize_hook_result(name, ret, {"admissible": ["go to cabinet 1"]}) == expected


def test_returned_text_is_cleaned_as_by_split_and_join():
    # The fast path of runner._clean_text rests on: every whitespace character but ' ' and every
    # lone surrogate is unprintable, so printable one-spaced text needs no split/join or safe_str.
    assert [c for c in map(chr, range(0x110000)) if c.isspace() and c.isprintable()] == [" "]
    assert not any(chr(c).isprintable() for c in range(0xD800, 0xE000))
    texts = ["a b", "", " a", "a ", "a  b", "a\tb", "a\u00a0b", "a\u2028b", "a\u3000b", "x\ud800y", "\u200bz",
             "w " * 1000, "é😀 ok", "a\x1cb"]
    for text in texts:
        got = normalize_hook_result("make_pre_hint", {"message": text}, {})
        want = " ".join(text[:3600].split())[:900].encode("utf-8", "replace").decode("utf-8")
        assert got == ({"message": want} if want else None), repr(text)


def test_every_registered_instance_pattern_gates_returned_actions():
    force = {"kind": "force_action", "action": "Press slot 3"}
    with registry.registered("ruled", "ruled_benchmark:BENCHMARK"):   # its PatchSpec.instance_action_re
        assert normalize_hook_result("on_before_action", force, {}) is None
        assert normalize_hook_result("on_before_action", force, {"admissible": ["press slot 3"]}) == {
            "kind": "force_action", "action": "press slot 3"}
    assert normalize_hook_result("on_before_action", force, {})["action"] == "press slot 3"


def test_outcome_statuses_and_nb_partial_writes():
    patch = {"benchmark": "webshop", "description": "", "actions": [
        {"type": "add_code_hook", "hook": "make_pre_hint", "code": "def hook(ctx, nb):\n    nb['a'] = 1\n    return None"},
        {"type": "add_code_hook", "hook": "make_pre_hint",
         "code": "def hook(ctx, nb):\n    nb['b'] = 2\n    return {'message': 'x' + 1}"},
        {"type": "add_code_hook", "hook": "make_pre_hint", "code": "def hook(ctx, nb):\n    return {'msg': 'typo'}"},
        {"type": "add_code_hook", "hook": "make_pre_hint",
         "code": "def hook(ctx, nb):\n    for i in range(100000):\n        nb['i'] = i"},
        {"type": "add_code_hook", "hook": "make_pre_hint",
         "code": "def hook(ctx, nb):\n    return {'message': 'seen ' + str(nb['a'] + nb['b'])}"},
        {"type": "add_code_hook", "hook": "on_init", "code": "def hook(ctx, nb):\n    return None"},
    ]}
    compiled = compile_patch(patch, "webshop", line_budget=300)
    assert [len(compiled.hooks[k]) for k in ("make_pre_hint", "on_init")] == [5, 1]
    nb = {}
    outcomes = compiled.call("make_pre_hint", {}, nb)
    assert all(isinstance(o, HookOutcome) and o.hook == "make_pre_hint" for o in outcomes)
    assert [o.status for o in outcomes] == ["none", "error", "invalid_return", "timeout", "ok"]
    assert "TypeError" in outcomes[1].error and "line budget" in outcomes[3].error
    assert outcomes[4].result == {"message": "seen 3"}
    assert nb["a"] == 1 and nb["b"] == 2 and nb["i"] > 0  # partial writes persist
    assert all(o.elapsed_s >= 0 for o in outcomes)
    assert compiled.call("on_post_step", {}, nb) == []
    # The first two hooks rewrite a and b before the last one reads them.
    assert compiled.effects("make_pre_hint", {}, {"a": 7, "b": 5}) == [{"message": "seen 3"}]
    assert compiled.hook_names == ["make_pre_hint"] * 5 + ["on_init"]


def test_timeout_is_not_swallowed_by_except_exception():
    fn = compile_hook("def spin(nb):\n    for i in range(100000):\n        for j in range(100000):\n            nb['j'] = j\n"
                      "def hook(ctx, nb):\n    try:\n        spin(nb)\n    except Exception:\n        return {'message': 'swallowed'}\n"
                      "    return {'message': 'finished'}", "webshop")
    assert run_hook(fn, {}, {}, "make_pre_hint", time_budget_s=0.02) is None


def test_nb_non_data_and_size_guard_drop_only_offending_keys():
    fn = hook("nb['ok'] = [1, 2]\nnb['bad'] = (x for x in range(3))\nreturn {'message': 'm'}")
    from hr1_jax.patch import call_hook
    nb = {"prior": "state"}
    out = call_hook(fn, {}, nb, "make_pre_hint")
    assert out.status == "error" and out.result is None and "generator" in out.error
    assert nb == {"prior": "state", "ok": [1, 2]}


def test_nb_size_is_counted_alike_flat_and_nested():
    # A flat nb of scalars takes a shortcut in inspect_nb: same units as the general walk.
    from hr1_jax.patch.guards import inspect_nb
    flat = {"ab": "xyz", "n": 5, "f": 1.5, "none": None, "t": True}
    size = 4 + 8 * 5 + (2 + 3) + (1 + 4) + (1 + 4) + (4 + 4) + (1 + 4)
    assert inspect_nb(flat, size) == "" and inspect_nb(flat, size - 1) == f"nb grew beyond {size - 1} units"
    nested = {"k": flat}  # the general walk: one more dict slot and its key
    assert inspect_nb(nested, size + 13) == "" and inspect_nb(nested, size + 12) != ""
    assert inspect_nb({}, 4) == "" and inspect_nb({}, 3) != ""
    assert "non-data" in inspect_nb({"g": (x for x in ())}, 1000) and "non-data" in inspect_nb({1j: 1}, 1000)


def test_allowed_modules_work():
    fn = hook("m = re.search('(\\\\d+) ounce', ctx.observation)\n"
              "r = SequenceMatcher(None, 'gray coat', 'grey coat').ratio()\n"
              "return {'message': m.group(1) + ' ' + str(round(r, 2)) + ' ' + str(math.floor(2.7)) + f' {3:03}'}")
    assert run_hook(fn, {"observation": "4.41 ounce pack"}, {}, "make_pre_hint") == {"message": "41 0.89 2 003"}
