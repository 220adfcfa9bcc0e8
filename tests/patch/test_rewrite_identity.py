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


# Every kind of syntax the parser makes (allowed or not): the pass must see all of its children.
_ALL_SYNTAX = '''
import os, sys as system
from a.b import c as d
async def f(x, /, y=1, *args, z, w=2, **kw) -> int:
    global g
    async with a as (b, c), d:
        async for i in j:
            await k
    try:
        pass
    except* ValueError as e:
        raise e from None
def h():
    nonlocal q
    yield 1
    yield from r
    lambda a, *b: (c := a)
    del x[1:2:3], y.z
    assert x, "m"
    match p:
        case [1, *rest] | {"k": v, **kw} if v > 0:
            pass
        case Point(x=0, y=_) | None | str() as s:
            pass
    with open(f) as fh:
        x: int = 1
        x += 2; x @= y; x |= ~z; x = not y
    while x:
        break
    else:
        continue
    for (i, j) in k:
        print(f"{i!r:>{j}}", {**a, 1: 2}, {1, 2}, [x for x in y if x for z in x], {a: b for a in c}, {a for a in b},
              (x for x in y), a if b else c, a < b <= c is not d, *e)
class C(B, metaclass=M):
    @deco
    def m(self): return self[1, 2]
'''


def test_the_pass_visits_every_child_of_every_node_the_parser_makes():
    # `_field_shapes` reads each field's shape from the ASDL signature of its type: a field it
    # skipped or took for a single node would hide nodes from the checks.
    from hr1_jax.patch.sandbox import _field_shapes
    for source in [_ALL_SYNTAX] + [code for code, _ in _hooks()]:
        for node in ast.walk(ast.parse(source)):
            singles, lists, ops = _field_shapes(type(node))
            assert not set(singles) & set(lists), type(node)  # no field of unknown shape
            op_fields = 0
            for field, value in ast.iter_fields(node):
                if field == "ctx":
                    continue
                if isinstance(value, ast.AST):
                    if value._fields:
                        assert field in singles, (type(node), field)
                    else:
                        op_fields += field not in singles
                elif isinstance(value, list) and any(isinstance(v, ast.AST) for v in value):
                    assert field in lists, (type(node), field)
            assert op_fields == ops, type(node)


def test_the_pass_counts_nodes_as_ast_walk():
    # The node cap is the reference's ast.walk count, module and ctx markers included.
    from hr1_jax.patch.sandbox import _Pass, _parse
    for code, _ in _hooks():
        tree, funcs = _parse(code)
        expected = len(list(ast.walk(tree)))
        checker = _Pass(funcs, None, set())
        assert checker.run()
        assert checker.count == expected
