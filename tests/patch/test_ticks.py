"""The counted budgets of the first wall after the single-pass rewrite: exact statement counts,
call depth only where recursion is possible, `isinstance` on the real types, the nesting cap."""
import threading

import pytest

from hr1_jax.patch import HookCompileError, compile_hook, guards
from hr1_jax.patch.runner import call_hook


def _src(body: str, helpers: str = "") -> str:
    return helpers + "def hook(ctx, nb):\n" + "\n".join("    " + ln for ln in body.split("\n")) + "\n"


def _run(code: str, line_budget: int = 2000, ctx=None):
    return call_hook(compile_hook(code, "webshop"), ctx or {}, {}, "make_pre_hint", line_budget=line_budget)


@pytest.mark.parametrize("body,helpers,lines", [
    # 3 statements in the hook body; the loop body counts its statement + the loop header per item
    ("x = 0\nfor i in range(10):\n    x = x + i\nreturn {'message': str(x)}", "", 3 + 10 * 2),
    # a helper call counts the helper's statements; a comprehension counts one per item drawn
    ("x = [f(i) for i in range(7)]\nreturn {'message': str(len(x))}", "def f(i):\n    return i\n", 2 + 7 + 7),
    ("if len(ctx) > 5:\n    return None\nelse:\n    y = 1\n    return {'message': str(y)}", "", 1 + 2),
])
def test_line_budget_counts_statements_exactly(body, helpers, lines):
    code = _src(body, helpers)
    assert _run(code, line_budget=lines).status == "ok"
    over = _run(code, line_budget=lines - 1)
    assert over.status == "timeout" and "line budget" in over.error


def _globals(code: str) -> dict:
    return compile_hook(code, "webshop").__globals__


def test_call_depth_is_counted_only_in_functions_that_can_recurse():
    plain = _globals(_src("return {'message': g(f(1))}", "def f(i):\n    return i\n\ndef g(i):\n    return str(i)\n"))
    assert all("_g_enter" not in plain[name].__code__.co_names for name in ("f", "g", "hook"))
    mutual = _globals(_src("return {'message': str(a(3))}", "def a(n):\n    return b(n)\n\n"
                           "def b(n):\n    return a(n - 1) if n > 0 else 0\n\ndef c(n):\n    return n\n"))
    assert {n for n in ("a", "b", "c", "hook") if "_g_enter" in mutual[n].__code__.co_names} == {"a", "b"}
    # A function name used as a value may be called from anywhere: every function counts.
    escaped = _globals(_src("return {'message': str(list(map(f, [1])))}", "def f(i):\n    return i\n"))
    assert all("_g_enter" in escaped[name].__code__.co_names for name in ("f", "hook"))


@pytest.mark.parametrize("body,helpers", [
    ("return {'message': str(f(0))}", "def f(n):\n    return f(n + 1)\n"),
    ("return {'message': str(a(0))}", "def a(n):\n    return b(n + 1)\n\ndef b(n):\n    return a(n + 1)\n"),
    # recursion through a function passed as a value, never named in its own body
    ("return {'message': str(f(f, 0))}", "def f(g, n):\n    return g(g, n + 1)\n"),
    ("return {'message': str(list(map(f, [0])))}", "def f(n):\n    return list(map(f, [n + 1]))\n"),
])
def test_runaway_recursion_stops_at_the_depth_cap(body, helpers):
    out = _run(_src(body, helpers), line_budget=10**6)
    assert out.status == "memory" and "call depth" in out.error, out


def test_isinstance_keeps_python_semantics():
    code = _src("a = isinstance(ctx['x'], list)\nb = isinstance(ctx['s'], (int, str))\n"
                "c = isinstance(ctx, dict)\nd = isinstance(ctx['x'], tuple)\n"
                "return {'message': str([a, b, c, d])}")
    assert _run(code, ctx={"x": [1], "s": "t"}).result == {"message": "[True, True, True, False]"}
    # A hook that rebinds a type name keeps its own meaning of it.
    shadow = _src("list = dict\nreturn {'message': str(isinstance({}, list))}")
    assert _run(shadow).result == {"message": "True"}
    assert "_g_t_list" not in compile_hook(shadow, "webshop").__code__.co_names
    # ... and the stand-ins stay what hook code calls: list(...) is still the checked constructor.
    bomb = _src("r = [0] * 100000\nx = list(map(list, [r] * 100000))\nreturn {'message': 'built'}")
    assert _run(bomb, line_budget=10**6).status == "memory"


def test_nesting_deeper_than_the_cap_is_rejected_at_compile_time():
    compile_hook(_src("return {'message': str(" + "(" * 150 + "1" + ",)" * 150 + ")}"), "webshop")
    with pytest.raises(HookCompileError) as e:
        compile_hook(_src("return nb" + "[0]" * 250), "webshop")
    assert e.value.code == "hook_too_complex"


def test_match_statement_bodies_are_counted():
    code = _src("match ctx.get('a'):\n    case 1:\n        x = 1\n        return {'message': 'one'}\n"
                "    case _:\n        return {'message': 'other'}")
    assert _run(code, line_budget=3, ctx={"a": 1}).result == {"message": "one"}  # match + 2 in the case
    assert _run(code, line_budget=2, ctx={"a": 1}).status == "timeout"


def test_str_calls_keep_the_size_check():
    assert _run(_src("return {'message': str(12) + str('ab') + str(None)}")).result == {"message": "12abNone"}
    big = _run(_src("x = [0] * 300000\nreturn {'message': str(x)[:5]}"), line_budget=10**6)
    assert big.status == "memory" and "str()" in big.error, big


def test_str_of_a_plain_str_is_that_str_and_of_a_subclass_a_plain_copy():
    text = "ab"
    assert guards.g_str(text) is text  # what str(text) returns, without the size walk

    class Sub(str):
        pass

    out = guards.g_str(Sub("cd"))
    assert type(out) is str and out == "cd"
    assert guards.g_str(b"ef", "ascii") == "ef"


def test_a_budget_is_seen_only_by_the_thread_that_set_it():
    # The ticks read the call's budget from a ContextVar: a new thread starts without it.
    budget = guards.CallBudget(line_budget=10)
    prev = guards.set_budget(budget)
    try:
        seen = []
        thread = threading.Thread(target=lambda: seen.append(guards.current_budget()))
        thread.start()
        thread.join()
        assert seen == [None] and guards.current_budget() is budget
    finally:
        guards.set_budget(prev)
    assert guards.current_budget() is prev
