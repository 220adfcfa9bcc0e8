"""Hostile patches: every case is rejected at compile time or contained at run time, and the host
process stays healthy (memory, tracer, a normal hook still runs)."""
import os
import sys
import threading
import time

import pytest

from hr1_jax.patch import HookCompileError, call_hook, compile_hook, run_hook
from hr1_jax.patch.guards import rss_bytes_of

COMPILE = "compile"
# Bombs whose guard needs some work before it trips may also hit the wall clock first; either
# status means the hook was stopped and had no effect.


def _h(body: str, helpers: str = "") -> str:
    """Source with `body` (4-space indented lines) as the hook body."""
    lines = "\n".join("    " + ln for ln in body.strip("\n").split("\n"))
    return f"{helpers}\ndef hook(ctx, nb):\n{lines}\n"


REC = "def f(n):\n    return f(n + 1)\n"

CASES = [
    # --- imports in every disguise
    ("import", _h("import os\nreturn None"), COMPILE),
    ("from_import", _h("from os import system\nreturn None"), COMPILE),
    ("dunder_import", _h("m = __import__('os')\nreturn None"), COMPILE),
    ("builtins_dict", _h("b = __builtins__\nreturn None"), COMPILE),
    ("top_level_import", "import os\n" + _h("return None"), COMPILE),
    ("importlib_attr", _h("x = re.importlib\nreturn None"), {"error"}),
    ("re_module_walk", _h("e = re.enum\nreturn {'message': str(e)}"), {"error"}),
    # --- dunder / class-hierarchy walks
    ("class_attr", _h("c = ctx.__class__\nreturn None"), COMPILE),
    ("subclasses", _h("s = ().__class__.__bases__[0].__subclasses__()\nreturn None"), COMPILE),
    ("mro_attr", _h("m = str.mro()\nreturn None"), COMPILE),
    ("func_globals", _h("g = hook.__globals__\nreturn None"), COMPILE),
    ("generator_frame", _h("g = (x for x in [1])\nf = g.gi_frame.f_back\nreturn None"), COMPILE),
    ("frame_globals_attr", _h("x = ctx.f_globals\nreturn None"), COMPILE),
    ("traceback_frame", _h("try:\n    1 / 0\nexcept Exception as e:\n    t = e.tb_frame\nreturn None"), COMPILE),
    ("code_object", _h("c = hook.co_code\nreturn None"), COMPILE),
    ("int_to_bytes", _h("b = (0).to_bytes(10**9, 'big')\nreturn None"), COMPILE),
    ("match_pattern", _h("m = re.match('a', 'a')\nreturn {'message': m.re.sub('', 'y' * 600, 'x' * 50000)}"), COMPILE),
    ("match_expand", _h("m = re.match('(a)', 'a')\nreturn {'message': m.expand('\\\\1' * 600)}"), COMPILE),
    ("underscore_name", _h("_x = 1\nreturn None"), COMPILE),
    # --- forbidden builtins and reflection
    ("getattr", _h("return getattr(ctx, 'get')('x')"), COMPILE),
    ("setattr", _h("setattr(nb, 'x', 1)\nreturn None"), COMPILE),
    ("delattr", _h("delattr(nb, 'x')\nreturn None"), COMPILE),
    ("eval", _h("return eval('1+1')"), COMPILE),
    ("exec", _h("exec('x = 1')\nreturn None"), COMPILE),
    ("open", _h("return {'message': open('/etc/passwd').read()}"), COMPILE),
    ("compile_builtin", _h("c = compile('1', 'f', 'eval')\nreturn None"), COMPILE),
    ("re_compile", _h("p = re.compile('a')\nreturn None"), COMPILE),
    ("type", _h("t = type(ctx)\nreturn None"), COMPILE),
    ("globals", _h("g = globals()\nreturn None"), COMPILE),
    ("locals", _h("g = locals()\nreturn None"), COMPILE),
    ("vars", _h("g = vars(ctx)\nreturn None"), COMPILE),
    ("dir", _h("g = dir(ctx)\nreturn None"), COMPILE),
    ("breakpoint", _h("breakpoint()\nreturn None"), COMPILE),
    ("input", _h("x = input()\nreturn None"), COMPILE),
    ("exit", _h("exit(0)"), COMPILE),
    ("quit", _h("quit()"), COMPILE),
    ("object", _h("o = object()\nreturn None"), COMPILE),
    ("super", _h("s = super()\nreturn None"), COMPILE),
    ("memoryview", _h("m = memoryview(b'x')\nreturn None"), COMPILE),
    ("print_runtime", _h("print('leak')\nreturn None"), {"error"}),
    ("hasattr_runtime", _h("return {'message': str(hasattr(ctx, 'x'))}"), {"error"}),
    ("next_iter_runtime", _h("return {'message': next(iter([1]))}"), {"error"}),
    # --- forbidden syntax
    ("lambda", _h("f = lambda: 1\nreturn None"), COMPILE),
    ("class", "class A:\n    pass\n" + _h("return None"), COMPILE),
    ("while", _h("while True:\n    pass"), COMPILE),
    ("raise", _h("raise Exception('x')"), COMPILE),
    ("with", _h("with nb as x:\n    pass\nreturn None"), COMPILE),
    ("global", _h("global x\nreturn None"), COMPILE),
    ("nested_def", _h("def g():\n    return 1\nreturn None"), COMPILE),
    ("async", "async def hook(ctx, nb):\n    return None\n", COMPILE),
    ("yield", _h("yield 1"), COMPILE),
    ("del", _h("del nb['x']\nreturn None"), COMPILE),
    ("top_level_assign", "x = 1\n" + _h("return None"), COMPILE),
    ("docstring", '"""doc"""\n' + _h("return None"), COMPILE),
    ("except_base", _h("try:\n    x = 1\nexcept BaseException:\n    pass\nreturn None"), COMPILE),
    ("bare_except", _h("try:\n    x = 1\nexcept:\n    pass\nreturn None"), COMPILE),
    ("try_finally", _h("try:\n    x = 1\nexcept Exception:\n    pass\nfinally:\n    pass\nreturn None"), COMPILE),
    ("except_star", _h("try:\n    x = 1\nexcept* Exception:\n    pass\nreturn None"), COMPILE),
    ("decorator", "def d(f):\n    return f\n@d\ndef hook(ctx, nb):\n    return None\n", COMPILE),
    ("bad_signature", "def hook(ctx, nb, extra=1):\n    return None\n", COMPILE),
    ("six_helpers", "".join(f"def h{i}():\n    return {i}\n" for i in range(6)) + _h("return None"), COMPILE),
    ("shadow_builtin", "def str(x):\n    return x\n" + _h("return None"), COMPILE),
    ("mutable_default", "def g(x=[]):\n    return x\n" + _h("return None"), COMPILE),
    ("long_literal", _h("s = '" + "x" * 701 + "'\nreturn None"), COMPILE),
    ("too_many_nodes", _h("x = [" + ", ".join(["1"] * 1300) + "]\nreturn None"), COMPILE),
    ("too_long_code", _h("x = 1\n" * 1700 + "return None"), COMPILE),
    # --- format-string attribute access
    ("format_attr", _h("return {'message': '{0.__class__}'.format(ctx)}"), {"error"}),
    ("format_gi_frame", _h("g = (x for x in [1])\nreturn {'message': '{0.gi_frame}'.format(g)}"), {"error"}),
    ("format_map_attr", _h("return {'message': '{x.get}'.format_map({'x': ctx})}"), {"error"}),
    ("format_unbound", _h("return {'message': str.format('{0.__class__.__mro__}', ctx)}"), {"error"}),
    ("format_index_dunder", _h("return {'message': '{0[__class__]}'.format({})}"), {"error"}),
    # --- infinite loops and time
    ("nested_loop", _h("for i in range(100000):\n    for j in range(100000):\n        nb['i'] = i"), {"timeout"}),
    ("loop_swallow", _h("for i in range(100000):\n    try:\n        for j in range(100000):\n"
                        "            nb['i'] = j\n    except Exception:\n        pass"), {"timeout"}),
    ("comprehension_loop", _h("x = [a * b for a in range(100000) for b in range(100000)]"), {"timeout"}),
    ("difflib_slow", _h("m = SequenceMatcher(None, 'ab' * 40000, 'ba' * 40000)\nreturn {'message': str(m.ratio())}"),
     {"timeout", "memory"}),
    ("recursive_helper_loop", "def g(n):\n    for i in range(100000):\n        n = n + 1\n    return n\n"
     + _h("return {'message': str(g(0) + g(1))}"), {"timeout"}),
    # --- deep recursion
    ("deep_recursion", REC + _h("f(0)"), {"memory"}),
    ("recursion_swallowed", REC + _h("try:\n    f(0)\nexcept Exception:\n    return {'message': 'caught'}"),
     {"memory"}),
    ("mutual_recursion", "def a(n):\n    return b(n + 1)\ndef b(n):\n    return a(n + 1)\n" + _h("a(0)"), {"memory"}),
    # --- memory bombs
    ("str_mul", _h("s = 'x' * 10**9\nreturn {'message': s}"), {"memory"}),
    ("list_mul", _h("l = [0] * 10**9"), {"memory"}),
    ("list_range", _h("l = list(range(10**9))"), {"memory"}),
    ("sorted_range", _h("l = sorted(range(10**7))"), {"memory"}),
    ("big_pow", _h("x = 10 ** 10 ** 8"), {"memory"}),
    ("big_shift", _h("x = 1 << 10**10"), {"memory"}),
    ("int_square_loop", _h("x = 3\nfor i in range(64):\n    x = x * x"), {"memory"}),
    ("str_doubling", _h("s = 'ab'\nfor i in range(64):\n    s = s + s"), {"memory"}),
    ("aug_doubling", _h("s = 'ab'\nfor i in range(64):\n    s += s"), {"memory"}),
    ("aug_mul", _h("s = 'ab'\ns *= 10**9"), {"memory"}),
    ("extend_doubling", _h("l = [1]\nfor i in range(64):\n    l.extend(l)"), {"memory"}),
    ("join_bomb", _h("l = ['x' * 100000] * 100000\nreturn {'message': ','.join(l)}"), {"memory"}),
    ("fstring_bomb", _h("s = 'x' * 900000\nreturn {'message': f'{s}{s}{s}'}"), {"memory"}),
    ("fstring_width", _h("return {'message': f'{1:>1000000000}'}"), {"memory"}),
    ("fstring_dynamic_width", _h("w = 10**9\nreturn {'message': f'{1:>{w}}'}"), {"memory"}),
    ("percent_width", _h("return {'message': '%0999999999d' % 1}"), {"memory"}),
    ("percent_star", _h("return {'message': '%*d' % (10**9, 1)}"), {"memory"}),
    ("format_width", _h("return {'message': '{:>999999999}'.format(1)}"), {"memory"}),
    ("ljust", _h("return {'message': 'x'.ljust(10**9)}"), {"memory"}),
    ("zfill", _h("return {'message': '1'.zfill(10**9)}"), {"memory"}),
    ("expandtabs", _h("return {'message': ('a\\t' * 1000).expandtabs(10**6)}"), {"memory"}),
    ("replace_bomb", _h("s = 'x' * 100000\nreturn {'message': s.replace('', 'y' * 600)}"), {"memory"}),
    ("translate_bomb", _h("s = 'a' * 1000000\nreturn {'message': s.translate({97: 'b' * 600})}"), {"memory"}),
    ("dag_str", _h("x = [0]\nfor i in range(40):\n    x = [x, x]\nreturn {'message': str(x)}"), {"memory"}),
    ("dag_percent", _h("x = [0]\nfor i in range(40):\n    x = [x, x]\nreturn {'message': '%s' % (x,)}"), {"memory"}),
    ("dag_fstring", _h("x = [0]\nfor i in range(40):\n    x = [x, x]\nreturn {'message': f'{x!r}'}"), {"memory"}),
    ("dag_map_str", _h("x = [0]\nfor i in range(30):\n    x = [x, x]\nl = list(map(str, [x] * 10))"), {"memory"}),
    ("sum_concat", _h("l = sum([[0] * 1000] * 10000, [])"), {"memory", "timeout"}),
    ("factorial", _h("x = math.factorial(10**7)"), {"memory"}),
    ("comb", _h("x = math.comb(10**7, 5 * 10**6)"), {"memory"}),
    ("prod", _h("x = math.prod(range(2, 100000))"), {"memory", "timeout"}),
    ("round_digits", _h("x = round(5, -10**9)"), {"memory"}),
    ("star_unpack", _h("l = [0] * 900000\nx = [*l, *l, *l, *l, *l, *l, *l, *l, *l, *l, *l, *l, *l, *l, *l, *l, *l, *l]"),
     {"memory", "timeout"}),
    ("alloc_budget", _h("keep = []\nfor i in range(200):\n    keep.append('x' * 900000)"), {"memory"}),
    ("map_list_copies", _h("r = range(100000)\nl = list(map(list, [r] * 100000))"), {"memory", "timeout"}),
    ("map_sorted_copies", _h("r = list(range(100000))\nl = list(map(sorted, [r] * 100000))"), {"memory", "timeout"}),
    ("zip_star", _h("r = range(100000)\nl = list(zip(*[r] * 100000))"), {"memory", "timeout"}),
    ("dict_copies", _h("d = dict(zip(range(100000), range(100000)))\nl = list(map(dict, [d] * 100000))"),
     {"memory", "timeout"}),
    ("slice_copies", _h("l = [0] * 1000000\nkeep = []\nfor i in range(1000):\n    keep.append(l[:])"),
     {"memory", "timeout"}),
    # --- catastrophic regex
    ("regex_nested", _h("return {'message': str(re.match('(a+)+$', 'a' * 40 + 'b'))}"), {"memory"}),
    ("regex_alternation", _h("return {'message': str(re.search('(a|aa)*c', 'a' * 60))}"), {"ok", "timeout"}),
    ("regex_polynomial", _h("return {'message': str(re.search('a.*b.*c', 'a' * 90000))}"), {"timeout"}),
    ("regex_polynomial_caught", _h("try:\n    x = re.findall('a.*b', 'a' * 90000)\nexcept Exception:\n"
                                   "    return {'message': 'swallowed'}"), {"timeout"}),
    ("regex_backref", _h("return {'message': str(re.search('(a*)*\\\\1', 'a' * 40))}"), {"memory"}),
    ("regex_long_subject", _h("s = 'a' * 900000\nreturn {'message': str(re.findall('a', s))}"), {"memory"}),
    ("regex_sub_bomb", _h("return {'message': re.sub('', 'y' * 600, 'x' * 50000)}"), {"memory", "timeout"}),
    # --- exceptions derived from BaseException (not reachable, and never swallowed)
    ("keyboard_interrupt", _h("x = KeyboardInterrupt()\nreturn None"), {"error"}),
    ("system_exit", _h("x = SystemExit(3)\nreturn None"), {"error"}),
    ("generator_exit", _h("x = GeneratorExit\nreturn None"), {"error"}),
    # --- huge / bad returns
    ("huge_message", _h("return {'message': 'x ' * 450000}"), {"ok"}),
    ("huge_skills", _h("return {'skills': ['tip'] * 100000, 'tool_hint': 'y' * 5000}"), {"ok"}),
    ("non_dict_return", _h("return ['message']"), {"invalid_return"}),
    ("generator_return", _h("return (x for x in range(10))"), {"invalid_return"}),
    ("dag_return", _h("x = [0]\nfor i in range(40):\n    x = [x, x]\nreturn {'message': x, 'kind': x}"),
     {"invalid_return"}),
    # --- nb abuse
    ("nb_bloat", _h("for i in range(50):\n    nb[i] = 'x' * 100000"), {"memory"}),
    ("nb_generator", _h("nb['g'] = (x for x in range(10**5))"), {"error"}),
    ("nb_function", "def g(x):\n    return x\n" + _h("nb['f'] = g"), {"error"}),
    ("nb_dag", _h("x = [0]\nfor i in range(40):\n    x = [x, x]\nnb['x'] = x"), {"memory"}),
    ("nb_cycle", _h("l = []\nl.append(l)\nnb['l'] = l"), {"memory"}),
]

ON_INIT_CASES = {"huge_skills"}


@pytest.mark.parametrize("name,code,expect", CASES, ids=[c[0] for c in CASES])
def test_hostile_case(name, code, expect):
    hook_name = "on_init" if name in ON_INIT_CASES else "make_pre_hint"
    if expect == COMPILE:
        with pytest.raises(HookCompileError):
            compile_hook(code, "webshop")
        return
    fn = compile_hook(code, "webshop")
    nb = {"keep": "me"}
    start = time.perf_counter()
    # The default budgets: the statement count and the guards decide, so the status is the
    # same on a loaded CI box; the wall clock is only the far net.
    outcome = call_hook(fn, {"state": {"x": 1}}, nb, hook_name)
    assert outcome.status in expect, outcome
    assert time.perf_counter() - start < 60, outcome  # contained, not hung
    if outcome.result is not None:
        text = outcome.result.get("message") or outcome.result.get("tool_hint")
        assert len(text) <= 900
        assert len(outcome.result.get("skills", [])) <= 5
    assert outcome.error == "" or len(outcome.error) <= 400
    assert nb.get("keep") == "me" or name in ("nb_bloat",)
    # nb keeps only plain bounded data afterwards.
    assert all(not callable(v) and type(v).__name__ != "generator" for v in nb.values())


def test_enough_hostile_cases():
    assert len(CASES) >= 60
    assert sum(1 for c in CASES if c[2] == COMPILE) >= 25 and sum(1 for c in CASES if c[2] != COMPILE) >= 25


def _rss_bytes() -> int:
    return rss_bytes_of(os.getpid())


def test_host_healthy_after_all_hostile_cases():
    sentinel = lambda frame, event, arg: None  # noqa: E731
    hooks = [compile_hook(code, "webshop") for _, code, expect in CASES if expect != COMPILE]
    before = _rss_bytes()
    sys.settrace(sentinel)
    try:
        for fn in hooks:
            call_hook(fn, {}, {}, "make_pre_hint")
            assert sys.gettrace() is sentinel, "the runner must restore the caller's tracer"
    finally:
        sys.settrace(None)
    assert _rss_bytes() - before < 400 * 2**20
    good = compile_hook(_h("nb['n'] = nb.get('n', 0) + 1\nreturn {'message': 'step ' + str(nb['n'])}"), "webshop")
    nb = {}
    assert run_hook(good, {}, nb, "make_pre_hint") == {"message": "step 1"}
    assert run_hook(good, {}, nb, "make_pre_hint") == {"message": "step 2"}


def test_ctx_mutations_are_contained_and_never_leak():
    ctx = {"state": {"page_type": "home", "clickables": ["buy now"]}, "admissible": ["look"]}
    snapshot = repr(ctx)
    attempts = [
        "ctx['x'] = 1", "ctx['state'].update({'page_type': 'x'})",
        "dict.update(ctx, {'x': 1})", "dict.setdefault(ctx['state'], 'x', 1)", "list.append(ctx['admissible'], 'x')",
        "ctx['admissible'].append('x')", "a = ctx['admissible']\na += ['x']", "ctx['state']['clickables'][0] = 'x'",
        "ctx.pop('state')", "ctx.clear()", "list.sort(ctx.state.clickables)",
    ]
    for body in attempts:
        fn = compile_hook(_h(body + "\nreturn {'message': 'mutated'}"), "webshop")
        outcome = call_hook(fn, ctx, {}, "make_pre_hint")
        assert outcome.status == "error" and "read-only" in outcome.error, (body, outcome)
    with pytest.raises(HookCompileError, match="attribute"):  # attribute writes never compile
        compile_hook(_h("ctx.state.page_type = 'x'\nreturn {'message': 'mutated'}"), "webshop")
    # A hook may copy ctx and edit its copy; nothing reaches the caller either way.
    fn = compile_hook(_h("c = ctx.copy()\nc['x'] = 1\nc['state'] = 2\nreturn {'message': str(len(c))}"), "webshop")
    assert run_hook(fn, ctx, {}, "make_pre_hint") == {"message": "3"}
    assert repr(ctx) == snapshot


def test_aliased_unbound_mutator_cannot_reach_caller_or_next_hook():
    from hr1_jax.patch import compile_patch
    patch = {"benchmark": "webshop", "description": "", "actions": [
        {"type": "add_code_hook", "hook": "make_pre_hint",
         "code": "def hook(ctx, nb):\n    d = dict\n    d.update(ctx, {'x': 1})\n    return {'message': str(ctx.get('x'))}"},
        {"type": "add_code_hook", "hook": "make_pre_hint",
         "code": "def hook(ctx, nb):\n    return {'message': str(ctx.get('x'))}"}]}
    ctx = {"a": 1}
    outcomes = compile_patch(patch, "webshop").call("make_pre_hint", ctx, {})
    # The first hook only changed its private copy; the second hook and the caller never see it.
    assert [o.result for o in outcomes] == [{"message": "1"}, {"message": "None"}]
    assert ctx == {"a": 1}


def test_budget_stops_hook_in_worker_thread():
    fn = compile_hook(_h("for i in range(100000):\n    for j in range(100000):\n        nb['j'] = j"), "webshop")
    box = {}

    def work():
        box["outcome"] = call_hook(fn, {}, {}, "make_pre_hint", time_budget_s=0.05, line_budget=10**9)

    t = threading.Thread(target=work)
    start = time.perf_counter()
    t.start()
    t.join(5)
    assert not t.is_alive()
    assert box["outcome"].status == "timeout" and "wall-clock" in box["outcome"].error
    assert time.perf_counter() - start < 30  # stopped, not hung (no speed claim: CI boxes are loaded)


def test_regex_backtracking_stopped_in_worker_thread():
    fn = compile_hook(_h("return {'message': str(re.search('a.*b.*c', 'a' * 90000))}"), "webshop")
    box = {}
    t = threading.Thread(target=lambda: box.update(o=call_hook(fn, {}, {}, "make_pre_hint", time_budget_s=0.05)))
    start = time.perf_counter()
    t.start()
    t.join(10)
    assert box["o"].status == "timeout" and "regex" in box["o"].error
    assert time.perf_counter() - start < 30  # stopped, not hung


def test_line_budget_in_worker_thread():
    fn = compile_hook(_h("for i in range(100000):\n    nb['i'] = i"), "webshop")
    box = {}
    t = threading.Thread(target=lambda: box.update(o=call_hook(fn, {}, {}, "make_pre_hint", time_budget_s=30,
                                                                 line_budget=500)))
    t.start()
    t.join(5)
    assert box["o"].status == "timeout" and "line budget" in box["o"].error


def test_concurrent_threads_keep_separate_budgets():
    slow = compile_hook(_h("for i in range(100000):\n    for j in range(100000):\n        nb['j'] = j"), "webshop")
    fast = compile_hook(_h("nb['n'] = nb.get('n', 0) + 1\nreturn {'message': 'ok'}"), "webshop")
    results = {}
    threads = [threading.Thread(target=lambda: results.update(slow=call_hook(slow, {}, {}, "make_pre_hint")))]
    threads += [threading.Thread(target=lambda k=k: results.update(
        {k: [run_hook(fast, {}, {}, "make_pre_hint") for _ in range(50)]})) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert results["slow"].status == "timeout"
    for k in range(3):
        assert results[k] == [{"message": "ok"}] * 50


def test_memory_net_stops_unguarded_copies_in_a_loop():
    # Slices are not rewritten; the sampled resident-memory check stops the loop instead.
    fn = compile_hook(_h("l = [0] * 1000000\nkeep = []\nfor i in range(1000):\n    keep.append(l[:])"), "webshop")
    before = _rss_bytes()
    outcome = call_hook(fn, {}, {}, "make_pre_hint", time_budget_s=60, line_budget=10**6)
    assert outcome.status == "memory" and "process memory grew" in outcome.error, outcome
    assert _rss_bytes() - before < 200 * 2**20  # the copies were released with the hook's frame
