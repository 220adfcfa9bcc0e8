"""The sandbox's one check-and-rewrite pass (`sandbox._Pass`) keeps the first wall as it was: the
rewritten trees of every shipped hook are pinned (digest computed with the separate check, facts
and rewrite passes it replaced), and a hook breaking several rules gets the verdict of the
reference's order (node count, then breadth first), not the pass's depth-first first failure."""
import ast
import hashlib
import json

import pytest

from hr1_jax.patch import HookCompileError
from hr1_jax.patch.sandbox import _check_and_rewrite, compile_hook

from tests.patch.refdata import reference_patch_files

# sha256 over ast.dump(rewritten tree, include_attributes=True) of every add_code_hook of the
# shipped reference patches in file order (62 hooks), as the rewrite of 4ccc5a3 made them.
SHIPPED_REWRITE_SHA256 = "0be659407e8cb6172acb433c60f6b780d57edd4f6c87108642199a1c5b2ac200"


def _hooks() -> list[tuple[str, str]]:
    out = []
    for path in reference_patch_files():
        patch = json.loads(path.read_text(encoding="utf-8"))
        out += [(a["code"], patch["benchmark"].lower()) for a in patch["actions"] if a["type"] == "add_code_hook"]
    return out


def test_shipped_hooks_rewrite_to_the_pinned_trees():
    hooks = _hooks()
    digest = hashlib.sha256()
    for code, benchmark in hooks:
        digest.update(ast.dump(_check_and_rewrite(code, benchmark), include_attributes=True).encode())
    assert len(hooks) == 62
    assert digest.hexdigest() == SHIPPED_REWRITE_SHA256


def _code(source: str) -> str:
    with pytest.raises(HookCompileError) as e:
        compile_hook(source, "alfworld")
    return e.value.code


def test_several_broken_rules_give_the_reference_order_verdict():
    # Depth first meets `ctx.__class__` (level 5) before `_y` (level 3): breadth first, `_y` is first.
    assert _code("def hook(ctx, nb):\n    x = len(ctx.__class__)\n    return _y\n") == "forbidden_name"
    # The node cap is checked before any node: a forbidden name in a too-big hook is too_many_nodes.
    big = "def hook(ctx, nb):\n    y = _x\n    x = [" + ", ".join(["1"] * 1300) + "]\n    return None\n"
    assert _code(big) == "too_many_nodes"
    # Nesting depth comes before both.
    deep = "def hook(ctx, nb):\n    y = _x\n    return " + "-" * 300 + "1\n"
    assert _code(deep) == "hook_too_complex"


def test_a_bound_builtin_type_name_keeps_its_stand_in():
    # The pass assumes no builtin type name is bound and reruns when one is (`str = ...`).
    plain = ast.dump(_check_and_rewrite("def hook(ctx, nb):\n    return isinstance(ctx, (str, int))\n", ""))
    bound = ast.dump(_check_and_rewrite("def hook(ctx, nb):\n    str = 1\n    return isinstance(ctx, (str, int))\n", ""))
    assert "_g_t_str" in plain and "_g_t_int" in plain
    assert "_g_t_str" not in bound and "_g_t_int" not in bound  # one name unreal: the tuple stays as written
    shadowed = ast.dump(_check_and_rewrite("def hook(ctx, nb):\n    isinstance = len\n    return str(ctx)\n", ""))
    assert "_g_str" not in shadowed
