"""Hostile hooks against both walls of the hook sandbox, and the child-side runner of one case.

Used by tests/patch/test_hostile_walls.py. Every case runs in its own child process (see
`run_isolated`): the child lowers its own address-space limit, compiles the patch with
`compile_patch` (default isolation unless HR1_HOSTILE_ISOLATION is set), calls it, and reports a
verdict as JSON; the parent kills the child if it hangs or its memory grows too far, so a case
that is not contained fails instead of taking the machine down.

Verdicts:
* "rejected": compile_patch raised PatchError (HookCompileError is one);
* "contained": the calls returned, no outcome carried the attack's effect (the marker PWNED, or
  nb['pwned'] written after the attack step), results are sane, nb is plain data, ctx unchanged,
  the host's memory stayed flat (peak and end RSS < 200 MB above the start), a benign reference
  patch still gives its effect, and for shared-state cases a victim patch (or the same patch in a
  fresh episode) behaves exactly as when run alone;
* "NOT contained": anything else (with the reasons), including a hang, a host crash or a host
  memory blow-up detected by the parent.

Run all cases and print a table:  python -m tests.patch.hostile_cases [--isolation inline] [names...]
"""
from __future__ import annotations

import copy
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARK = "PWNED"
CASE_LIMIT_S = float(os.environ.get("HR1_HOSTILE_CASE_LIMIT_S", "60"))   # parent kills the child after this
CALL_LIMIT_S = 30.0                # one CompiledPatch.call taking longer is not contained
HOST_GROWTH_LIMIT = 200 * 2**20    # peak and end RSS growth of the calling process
CHILD_AS_HEADROOM = 3 * 2**30      # the child's own address-space limit above its size at start
CHILD_RSS_KILL = int(2.5 * 2**30)  # the parent kills a child whose RSS passes this

SITE_WIN = {
    "make_pre_hint": "return {'message': 'PWNED'}",
    "on_before_action": "return {'kind': 'block_and_prompt', 'message': 'PWNED'}",
    "on_post_step": "return {'kind': 'inject_hint', 'message': 'PWNED'}",
    "on_init": "return {'skills': ['PWNED'], 'tool_hint': 'PWNED'}",
}

DEFAULT_CTX = {
    "state": {"page_type": "search", "clickables": ["buy now", "back to search", "red"], "remaining_steps": 5},
    "admissible": ["look", "inventory", "go to desk 1"],
    "task": {"task_type": "pick", "goal": "find a red mug"},
    "action": {"tool": "click_action", "value": "buy now"},
}
BENIGN_CODE = "def hook(ctx, nb):\n    return {'message': 'ok'}\n"
BENIGN_RESULT = {"message": "ok"}


@dataclass
class Case:
    name: str
    cls: str                      # budget | c_call | memory | shared | host | compile
    code: str
    expect: str = "contained"     # "contained" (rejection also acceptable) or "rejected" (only rejection)
    site: str = "make_pre_hint"
    benchmark: str = "webshop"
    calls: int = 1
    victim: str | None = None     # make_pre_hint source of another patch, or "self" (fresh episode)
    observer: str | None = None   # a second hook of the same patch and site, compared with its solo run
    limits: dict = field(default_factory=dict)   # extra compile_patch kwargs for every patch of the case
    ctx: dict | None = None
    nb: dict | None = None
    raw: bool = False             # code is used verbatim (no WIN expansion)
    note: str = ""


def src(body: str, helpers: str = "", site: str = "make_pre_hint") -> str:
    """Hook source: `helpers` (top-level defs) + `def hook(ctx, nb):` with `body` indented. A line
    `WIN` becomes `nb['pwned'] = 1` + the site's marker return: reached only if the attack step
    before it completed."""
    lines = []
    for ln in textwrap.dedent(body).strip("\n").split("\n"):
        if ln.strip() == "WIN":
            ind = ln[:len(ln) - len(ln.lstrip())]
            lines += [ind + "nb['pwned'] = 1", ind + SITE_WIN[site]]
        else:
            lines.append(ln)
    head = textwrap.dedent(helpers).strip("\n")
    body = "\n".join("    " + ln for ln in lines)
    return (head + "\n\n" if head else "") + f"def hook(ctx, nb):\n{body}\n"


def C(name, cls, body, helpers="", site="make_pre_hint", **kw) -> Case:
    return Case(name, cls, src(body, helpers, site), site=site, **kw)


def nest(inner: str, k: int, kind: str = "tuple") -> str:
    """`inner` wrapped k times in a one-element tuple/list display (one source line)."""
    if kind == "tuple":
        return "(" * k + inner + ",)" * k
    return "[" * k + inner + "]" * k


LOOP = "t = 0\nfor i in range(100000):\n    for j in range(100):\n        t += j\n"   # 10**7 statements
DAG60_LIST = "a = [0]\nb = [0]\nfor i in range(60):\n    a = [a, a]\n    b = [b, b]\n"
DAG60_TUPLE = "t = (0,)\nfor i in range(60):\n    t = (t, t)\n"
DAG40_LIST = "x = [0]\nfor i in range(40):\n    x = [x, x]\n"
BIGHEX = "a = int('f' * 1000000, 16)\nb = int('e' * 500000, 16)\n"          # 4M-bit and 2M-bit ints
UCS2_1M = "s = '\\u0101' * 1000000\n"                                         # 2 MB per copy
M61 = "M = 2 ** 61 - 1\n"                                                     # hash(i * M) == 0 for all i

CASES: list[Case] = [
    # ------------------------------------------------------------------ budget escapes
    C("gen_finalizer_swallows_budget_error", "budget",
      "gs = [(x for x in range(3)) for i in range(100)]\nfor g in gs:\n    for x in g:\n        break\n"
      "big = ['a' * 20000 + 'b', 'a' * 20000 + 'a'] * 2000\n"
      "y = [sorted(big), gs.clear()]\n" + LOOP + "WIN",
      note="suspended generators finalised right after a long C call: a budget error raised in their "
           "frames is 'ignored' (and used to switch the tracer off)"),
    C("recursion_error_at_limit_swallowed", "budget",
      "t = (str,)\nfor i in range(8):\n    t = " + nest("t", 150) + "\n    try:\n        isinstance(1, t)\n"
      "    except Exception:\n        nb['depth'] = i\n" + LOOP + "WIN",
      note="isinstance over a 1200-deep tuple reaches the recursion limit inside a guard/tracer call; "
           "the RecursionError is an Exception the hook catches"),
    C("runaway_nested_genexp", "budget", "n = sum(1 for a in range(100000) for b in range(100000))\nWIN"),
    C("runaway_map_over_helper", "budget",
      "n = 0\nfor k in range(100):\n    n = n + sum(map(f, range(100000)))\nWIN", "def f(i):\n    return i + 1\n"),
    C("runaway_sorted_key_helper", "budget",
      "x = [sorted(range(100000), key=f) for k in range(100)]\nWIN", "def f(i):\n    return -i\n"),
    C("fanout_recursion_via_helpers", "budget", "x = f(60)\nWIN",
      "def f(n):\n    if n == 0:\n        return 1\n    return f(n - 1) + f(n - 1)\n"),
    C("recursion_through_map", "budget", "x = g(40)\nWIN", "def g(n):\n    return sum(map(g, range(n)))\n"),
    C("recursion_through_resub_callback", "budget", "x = re.sub('a', r, 'aaaa')\nWIN",
      "def r(m):\n    return re.sub('a', r, 'aaaa')\n"),
    C("difflib_work_outside_ticks", "budget",
      "sm = SequenceMatcher(None, 'ab' * 700, 'ba' * 700, False)\nfor i in range(1000):\n"
      "    m = sm.find_longest_match(0, 1400, 0, 1400)\nWIN",
      note="each find_longest_match is ~1e6 Python steps in difflib frames, one statement tick"),

    # ------------------------------------------------------------------ single C calls no tick can interrupt
    C("dag_list_equality", "c_call", DAG60_LIST + "same = a == b\nWIN"),
    C("dag_dict_equality", "c_call",
      "a = {'k': 0}\nb = {'k': 0}\nfor i in range(60):\n    a = {'x': a, 'y': a}\n    b = {'x': b, 'y': b}\n"
      "same = a == b\nWIN"),
    C("dag_list_membership", "c_call", DAG60_LIST + "n = [b, b].count(a)\nWIN"),
    C("dag_tuple_hash_set", "c_call", DAG60_TUPLE + "s = {t}\nWIN"),
    C("dag_tuple_hash_fromkeys", "c_call", DAG60_TUPLE + "d = dict.fromkeys([t, t])\nWIN"),
    C("dag_tuple_hash_regex_cache_key", "c_call", DAG60_TUPLE + "try:\n    x = re.search(t, 'abc')\n"
      "except Exception:\n    x = None\nWIN", note="regex hashes the pattern for its cache key"),
    C("deep_tuple_hash_c_stack", "c_call",
      "t = (0,)\nfor i in range(490):\n" + ("    t = " + nest("t", 185) + "\n") * 3 + "s = {t}\nWIN",
      note="tuple hashing recurses in C without a recursion check: 270k levels overflow the C stack"),
    C("int_hash_collisions_set", "c_call", M61 + "s = set(range(0, 100000 * M, M))\nWIN",
      note="100k ints with equal hashes: quadratic probing inside one set() call"),
    C("int_hash_collisions_fromkeys", "c_call", M61 + "d = dict.fromkeys(range(0, 90000 * M, M))\nWIN"),
    C("respawn_after_repeated_kills", "c_call", DAG60_TUPLE + "s = {t}\nWIN", calls=4,
      note="the same site killed four times in a row; the benign patch must still run afterwards"),
    C("sorted_long_common_prefix", "c_call", "p = 'a' * 1000000\nl = [p + 'b', p + 'a'] * 500000\nx = sorted(l)\nWIN"),
    C("max_long_common_prefix", "c_call",
      "p = 'a' * 1000000\nl = [p + 'b', p + 'a'] * 500000\nx = [max(l), min(l), max(l), min(l)]\nWIN"),
    C("map_c_method_upper", "c_call", "s = 'a' * 1000000\nok = all(map(str.upper, [s] * 1000000))\nWIN"),
    C("map_bound_c_method_count", "c_call",
      "s = 'a' * 1000000\nn = sum(map(s.count, ['a' * 50 + 'b'] * 1000000))\nWIN"),
    C("bigint_hex_parse_division", "c_call", BIGHEX + "x = [a // b, a // (b + 1), a // (b + 2), a // (b + 3)]\nWIN",
      note="int(str, 16) has no digit limit; // and % of 4M-bit ints are unguarded"),
    C("bigint_from_bytes_modulo", "c_call",
      "a = int.from_bytes(('\\xff' * 1000000).encode('latin-1'), 'big')\nb = int('f' * 400000, 16)\n"
      "x = [a % b, a % (b + 1), a % (b + 2)]\nWIN"),
    C("math_perm_huge_n", "c_call", "x = math.perm(10 ** 30000, 5000)\nWIN",
      note="the perm guard only trips when both n and k exceed 5000"),
    C("math_isqrt_gcd_huge", "c_call",
      BIGHEX + "x = [math.isqrt(a), math.gcd(a, b * 3 + 1), math.isqrt(a + 1), math.isqrt(a + 2)]\nWIN"),
    C("pow_three_args", "c_call", "x = pow(7, 10 ** 30000, 10 ** 30000 + 1)\nWIN"),
    C("bigint_guarded_growth_paths", "c_call",
      "x = math.factorial(5000)\ny = math.comb(131072, 65536)\nz = math.prod(range(2, 30000))\n"
      "w = 1\nw <<= 10 ** 9\nfor i in range(30):\n    x = x * x\nWIN",
      note="factorial/comb/prod/<<= /repeated squaring: each path must stop at the integer cap"),
    C("bigint_str_of_huge", "c_call",
      "x = int('9' * 4300) ** 9\ns = [str(x), '%d' % x, f'{x}', '{:,}'.format(x)]\nWIN"),
    C("codec_decode_over_map", "memory",
      "e = '\\\\U0001d49c' * 90000\ns = e.encode('latin-1').decode('unicode_escape')\nb = s.encode('utf-7')\n"
      "l = list(map(b.decode, ['utf-7'] * 5000))\nWIN",
      note="unicode_escape/utf-7 round trip, then 5000 decodes of 360 KB each in one C call"),
    C("regex_huge_repeat_backtracking", "c_call",
      "x = [re.search('(?:ab){1,65535}c', 'ab' * 50000), re.search('(?:a{1000}){1000}', 'a' * 100000)]\nWIN"),
    C("codec_punycode_quadratic", "c_call",
      "s = ('%c' * 20000) % tuple(range(19968, 39968))\nb = s.encode('punycode')\nWIN",
      note="encodings/punycode.py is pure Python run without ticks, quadratic in distinct characters"),
    C("codec_idna_python_loop", "c_call",
      "s = '\\xe9.' * 500000\nb = [s.encode('idna'), s.encode('idna'), s.encode('idna')]\nWIN"),
    C("regex_scanner_pattern_no_timeout", "c_call",
      "p = re.finditer('(a|aa)*[^a]', '').pattern\nx = p.search('a' * 48)\nWIN",
      note="re.finditer(...) returns a regex Scanner whose .pattern is a raw Pattern: no timeout, no caps"),
    C("regex_alternation_exponential", "c_call", "x = re.search('(a|aa)*[^a]', 'a' * 48)\nWIN",
      note="not a nested quantifier, so the pattern check lets it through; the matcher timeout must stop it"),

    # ------------------------------------------------------------------ one-call memory bombs past the size guards
    C("percent_format_mapping_fields", "memory",
      "f = '%(a)9999s' * 50000\ns = f % {'a': '\\U0001d49c'}\nWIN",
      note="each %-width is <= 10000 and the mapping is tiny; the output (2 GB) is never charged"),
    C("bytes_percent_mapping_fields", "memory",
      "f = b'%(a)9999s' * 110000\ns = f % {b'a': b'x'}\nWIN"),
    C("translate_list_table", "memory",
      "s = 'a' * 1000000\nt = s.translate(['\\u0101' * 700] * 256)\nWIN",
      note="the translate guard only sizes dict tables; a list table maps each char to 700 chars"),
    C("list_over_map_of_c_method", "memory", UCS2_1M + "l = list(map(str.upper, [s] * 1000))\nWIN"),
    C("join_over_map_of_c_method", "memory", "s = '\\u0100' * 1000000\nx = ''.join(map(str.lower, [s] * 1000))\nWIN"),
    C("sorted_key_c_method_copies", "memory", UCS2_1M + "x = sorted([s] * 1000, key=str.upper)\nWIN"),
    C("set_over_map_of_c_method", "memory", UCS2_1M + "x = set(map(str.swapcase, [s] * 1000))\nWIN"),
    C("encode_namereplace_over_map", "memory",
      "s = '\\ufbf9' * 1000000\nl = list(map(str.encode, [s] * 25, ['ascii'] * 25, ['namereplace'] * 25))\nWIN",
      note="one char -> 88 bytes (its Unicode name)"),
    C("slice_assignment_doubling", "memory", "l = [0]\nfor i in range(27):\n    l[:0] = l\nWIN",
      note="l[:0] = l doubles a list without any guard"),
    C("str_of_dict_values_dag", "memory", DAG40_LIST + "d = {'k': x}\ns = str(d.values())\nWIN",
      note="repr_size counts a dict view as 120 chars"),
    C("format_of_dict_items_dag", "memory", DAG40_LIST + "d = {'k': x}\ns = '{}'.format(d.items())\nWIN"),
    C("list_index_error_repr_dag", "memory", DAG40_LIST + "try:\n    [1].index(x)\nexcept Exception:\n"
      "    pass\nWIN", note="list.index formats its ValueError with %R: a repr no guard sees"),
    C("resub_callable_returns_subject", "memory",
      "s = '\\U0001d49c' * 100000\ny = re.sub('.{52}', r, s)\nWIN", "def r(m):\n    return m.string\n",
      note="~1900 callbacks each return the 400 KB subject: 0.77 GB joined in one C call"),
    C("scanner_pattern_sub_bomb", "memory",
      "p = re.finditer('', '').pattern\ns = p.sub('\\u0101' * 700, 'x' * 1000000)\nWIN"),
    C("match_captures_over_map", "memory",
      "m = re.match('(?:(a))*', 'a' * 100000)\ncaps = list(map(m.captures, [1] * 3000))\nWIN",
      note="regex Match.captures builds a 100k-item list per call; map makes 3000 of them in one C call"),
    C("match_expandf_width", "memory", "m = re.match('(a)', 'a')\nx = m.expandf('{0:>999999999}')\nWIN"),
    C("format_map_many_wide_fields", "memory", "x = ('{a:>9999}' * 100000).format_map({'a': 'x'})\nWIN"),
    C("center_via_map_of_unbound", "memory", "l = list(map(str.center, ['x'] * 1000, [1000000] * 1000))\nWIN"),
    C("zfill_bound_alias_map", "memory", "z = '1'.zfill\nl = list(map(z, [1000000] * 1000))\nWIN"),
    C("ljust_rjust_bound_aliases", "memory",
      "f = ['x'.ljust, 'y'.rjust, b'z'.center]\nl = [list(map(g, [1000000] * 100)) for g in f]\nWIN"),
    C("expandtabs_type_alias", "memory", "e = str.expandtabs\nx = e('\\t' * 100000, 10000)\nWIN"),
    C("extend_type_alias_doubling", "memory",
      "e = list.extend\nl = [0] * 1000000\nfor i in range(30):\n    e(l, l)\nWIN"),
    C("sum_of_big_lists", "memory", "x = sum([[0] * 500000] * 1000, [])\nWIN"),

    # ------------------------------------------------------------------ shared state
    C("assign_math_pi", "shared", "math.pi = 0\nreturn None",
      victim="def hook(ctx, nb):\n    return {'message': str(math.pi) + ' ' + str(math.floor(2.5))}\n"),
    C("swap_re_search", "shared", "re.search = spy\nreturn None", "def spy(p, s, *a):\n    return 'hijacked'\n",
      victim="def hook(ctx, nb):\n    return {'message': str(re.search('b', 'abc').span())}\n"),
    C("swap_sequence_matcher_method", "shared", "SequenceMatcher.ratio = spy\nreturn None",
      "def spy(self):\n    return 0.0\n",
      victim="def hook(ctx, nb):\n    return {'message': str(SequenceMatcher(None, 'abc', 'abd').ratio())}\n"),
    C("swap_str_standin_method", "shared", "str.lower = spy\nreturn None", "def spy(s):\n    return 'hijacked'\n",
      victim="def hook(ctx, nb):\n    return {'message': str.lower('ABC') + ' ' + ','.join(map(str.lower, ['X']))}\n"),
    C("list_standin_attribute_channel", "shared", "list.leak = ctx['task']['goal']\nreturn None",
      victim="def hook(ctx, nb):\n    try:\n        v = list.leak\n    except Exception:\n        v = 'none'\n"
             "    return {'message': 'leak=' + str(v)}\n"),
    C("builtin_function_attribute_channel", "shared", "sorted.leak = ctx['task']['goal']\nreturn None",
      victim="def hook(ctx, nb):\n    try:\n        v = sorted.leak\n    except Exception:\n        v = 'none'\n"
             "    return {'message': 'leak=' + str(v)}\n"),
    C("hook_function_attribute_cache", "shared",
      "try:\n    hook.n = hook.n + 1\nexcept Exception:\n    hook.n = 1\nreturn {'message': 'call ' + str(hook.n)}",
      victim="self", note="state carried across episodes on the (cached) hook function object"),
    C("helper_attribute_cache", "shared",
      "try:\n    g.seen = g.seen + [ctx['task']['goal']]\nexcept Exception:\n    g.seen = [ctx['task']['goal']]\n"
      "return {'message': 'seen ' + str(len(g.seen))}", "def g(x):\n    return x\n", victim="self"),
    C("augassign_module_attribute", "shared", "math.e += 1\nreturn None",
      victim="def hook(ctx, nb):\n    return {'message': str(math.e)}\n"),
    C("mutable_default_kwonly_dict", "shared",
      "return {'message': 'call ' + str(g())}",
      "def g(*, cache={}):\n    cache['n'] = cache.get('n', 0) + 1\n    return cache['n']\n", victim="self"),
    C("mutable_default_set_call", "shared", "return {'message': 'call ' + str(g(1))}",
      "def g(x, seen=set()):\n    seen.add(len(seen))\n    return len(seen)\n", victim="self"),
    C("ctx_mutation_through_aliases", "shared",
      "d = dict\nd.update(ctx, {'admissible': ['pwned']})\nL = list\nL.append(ctx['state']['clickables'], 'pwned')\n"
      "L.sort(ctx['state']['clickables'])\nL.reverse(ctx['admissible'])\nd.setdefault(ctx['task'], 'x', 'pwned')\n"
      "return None",
      observer="def hook(ctx, nb):\n    return {'message': str(ctx.get('admissible')) + str(ctx['state']['clickables'])"
               " + str(ctx['task'].get('x'))}\n"),
    C("codec_cache_poisons_hook_process", "shared",
      "k = nb.get('k', 0)\nnb['k'] = k + 9\nbase = 'a' * 1000000\nfor i in range(k, k + 9):\n    try:\n"
      "        'x'.encode(base[i:])\n    except Exception:\n        nb['n'] = i\nreturn None",
      calls=6, limits={"memory_mb": 128},
      victim="def hook(ctx, nb):\n    keep = [[0] * 1000000 for i in range(5)]\n"
             "    return {'message': 'victim ' + str(len(keep))}\n",
      note="encodings.search_function caches every failed lookup by name, forever: ~2.8 MB per 1M-char "
           "name stays in the shared hook process (demonstrated with memory_mb=128)"),

    # ------------------------------------------------------------------ host side: returns, nb
    Case("huge_action_alfworld_regex", "host",
         "def hook(ctx, nb):\n    a = 'take ' * 199999\n    return {'kind': 'rewrite_action', 'action': a + 'x 1'}\n",
         site="on_before_action", benchmark="alfworld", raw=True),
    Case("huge_message_many_spaces", "host", "def hook(ctx, nb):\n    return {'message': 'a ' * 500000}\n", raw=True),
    Case("lone_surrogate_message", "host", "def hook(ctx, nb):\n    return {'message': 'x \\ud800 y'}\n", raw=True),
    Case("lone_surrogate_force_action", "host",
         "def hook(ctx, nb):\n    return {'kind': 'force_action', 'action': 'click[\\udcff]', 'message': '\\ud83d'}\n",
         site="on_post_step", raw=True),
    Case("lone_surrogate_skills", "host",
         "def hook(ctx, nb):\n    return {'skills': ['\\udfff tip', {'text': 'a\\ud800'}], 'tool_hint': '\\udbff'}\n",
         site="on_init", raw=True),
    Case("deeply_nested_return", "host",
         "def hook(ctx, nb):\n    x = 0\n    for i in range(500):\n        x = " + nest("x", 10, "list") + "\n"
         "    return {'message': 'deep', 'kind': x, 'skills': x, 'extra': x}\n", raw=True),
    Case("standin_objects_in_return", "host",
         "def g(x):\n    return x\n\ndef hook(ctx, nb):\n    return {'skills': [re, math, SequenceMatcher, "
         "re.match('a', 'a'), g, str, Exception('x')], 'tool_hint': SequenceMatcher(None, 'a', 'b'), 'message': str}\n",
         site="on_init", raw=True),
    Case("dag_return_skills", "host",
         "def hook(ctx, nb):\n    x = ['tip']\n    for i in range(40):\n        x = [x, x]\n"
         "    return {'skills': x, 'tool_hint': x}\n", site="on_init", raw=True),
    Case("nb_deeply_nested", "host",
         "def hook(ctx, nb):\n    x = 0\n    for i in range(500):\n        x = " + nest("x", 10, "list") + "\n"
         "    nb['deep'] = x\n    return {'message': 'ok'}\n", raw=True),
    Case("nb_near_size_cap", "host",
         "def hook(ctx, nb):\n    nb['a'] = 'x' * 900000\n    nb['b'] = [0] * 20000\n    return None\n", raw=True),
    Case("nb_non_plain_objects", "host",
         "def g(x):\n    return x\n\ndef hook(ctx, nb):\n    nb['gen'] = (i for i in range(3))\n    nb['fn'] = g\n"
         "    nb['m'] = re.match('a', 'a')\n    nb['t'] = str\n    nb['e'] = Exception('x')\n"
         "    nb['sm'] = SequenceMatcher(None, 'a', 'b')\n    nb['map'] = map(g, [1])\n    nb['re'] = re\n"
         "    nb['ctx'] = ctx\n    nb['keys'] = {'a': 1}.keys()\n    return {'message': 'ok'}\n", raw=True),
    Case("nb_huge_int", "host", "def hook(ctx, nb):\n    nb['n'] = 10 ** 39000\n    return None\n", raw=True),
    Case("nb_lone_surrogates", "host",
         "def hook(ctx, nb):\n    nb['\\ud800'] = '\\udfff' * 1000\n    return None\n", raw=True),
    Case("error_text_bomb", "host",
         "def hook(ctx, nb):\n    k = 'k' * 900000\n    return {'message': {}[k]}\n", raw=True),

    # ------------------------------------------------------------------ host crashes at compile time
    Case("source_deep_unary", "compile", "def hook(ctx, nb):\n    return " + "-" * 7000 + "1\n",
         expect="rejected", raw=True),
    Case("source_deep_call_chain", "compile", "def hook(ctx, nb):\n    return nb" + "()" * 1100 + "\n",
         expect="rejected", raw=True),
    Case("source_deep_subscripts", "compile", "def hook(ctx, nb):\n    return nb" + "[0]" * 390 + "\n",
         expect="rejected", raw=True),
    Case("source_nul_byte", "compile", "def hook(ctx, nb):\n    return None\x00\n", expect="rejected", raw=True),
    Case("source_nul_in_literal", "compile", "def hook(ctx, nb):\n    return {'message': 'a\x00b'}\n",
         expect="rejected", raw=True),
    Case("source_many_adjacent_literals", "compile",
         "def hook(ctx, nb):\n    return {'message': " + " ".join(["'ab'"] * 1500) + "}\n",
         expect="rejected", raw=True),
    Case("source_big_int_literal", "compile", "def hook(ctx, nb):\n    return " + "9" * 5000 + "\n",
         expect="rejected", raw=True),
    Case("source_fullwidth_exec", "compile", "def hook(ctx, nb):\n    return \uff45\uff58\uff45\uff43('1')\n",
         expect="rejected", raw=True, note="NFKC turns the fullwidth name into exec"),
    Case("source_fullwidth_dunder", "compile",
         "def hook(ctx, nb):\n    return ctx.\uff3f\uff3fclass\uff3f\uff3f\n", expect="rejected", raw=True),
]
CASES_BY_NAME = {c.name: c for c in CASES}
assert len(CASES_BY_NAME) == len(CASES), "duplicate case names"


# --------------------------------------------------------------------------- child side

def _status_kb(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _patch(code, site, benchmark, extra=()):
    actions = [{"type": "add_code_hook", "hook": site, "code": code}]
    actions += [{"type": "add_code_hook", "hook": s, "code": c} for s, c in extra]
    return {"benchmark": benchmark, "description": "hostile walls test", "actions": actions}


def _summary(outcomes) -> list:
    return [{"status": o.status, "result": o.result, "killed": bool(getattr(o, "killed", False)),
             "error": (o.error or "")[:160], "elapsed_s": round(float(o.elapsed_s or 0.0), 3)} for o in outcomes]


def _behaviour(outcomes) -> list:
    return [(o.status, o.result) for o in outcomes]


_PLAIN = (dict, list, tuple, set, frozenset, str, bytes, int, float, bool, type(None))


def _plain_problem(value, depth=0) -> str:
    if not isinstance(value, _PLAIN) or type(value).__module__ not in ("builtins", "hr1_jax.patch.guards"):
        return f"non-data {type(value).__name__}"
    if depth > 64:
        return "nested deeper than 64"
    if isinstance(value, dict):
        for k, v in value.items():
            why = _plain_problem(k, depth + 1) or _plain_problem(v, depth + 1)
            if why:
                return why
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            why = _plain_problem(v, depth + 1)
            if why:
                return why
    return ""


def _text_problem(value, what) -> str:
    if not isinstance(value, str):
        return f"{what} is {type(value).__name__}, not str"
    if len(value) > 900:
        return f"{what} has {len(value)} chars"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"{what} holds lone surrogates"
    return ""


def _result_problems(result) -> list[str]:
    if result is None:
        return []
    if not isinstance(result, dict):
        return [f"result is {type(result).__name__}"]
    out = []
    for key in ("message", "action", "tool_hint", "kind"):
        if key in result:
            why = _text_problem(result[key], key)
            if why:
                out.append(why)
    skills = result.get("skills", [])
    if not isinstance(skills, list) or len(skills) > 5:
        out.append("skills is not a list of at most 5")
    else:
        for s in skills:
            why = _text_problem(s.get("text") if isinstance(s, dict) else s, "skill text")
            if why:
                out.append(why)
    return out


def _run_episode(cp, case, ctx, nb, reasons, log, label):
    for i in range(case.calls):
        nb_before = copy.deepcopy(nb)
        t0 = time.monotonic()
        outcomes = cp.call(case.site, ctx, nb)
        dt = time.monotonic() - t0
        log.append({"episode": label, "call": i, "wall_s": round(dt, 3), "outcomes": _summary(outcomes)})
        if dt > CALL_LIMIT_S:
            reasons.append(f"call {i} ran {dt:.0f}s, past every budget")
        for o in outcomes:
            if o.status not in ("ok", "none", "error", "timeout", "memory", "invalid_return"):
                reasons.append(f"unknown status {o.status!r}")
            if o.result is not None and MARK in repr(o.result):
                reasons.append(f"attack effect reached the host (status {o.status}, result {str(o.result)[:80]})")
            reasons.extend(_result_problems(o.result))
            err = o.error or ""
            if len(err) > 1000 or _text_problem(err[:900], "error"):
                reasons.append(f"bad error text ({len(err)} chars)")
            if getattr(o, "killed", False) and nb != nb_before:
                reasons.append("a killed call changed nb")
        if nb.get("pwned"):
            reasons.append("the attack step completed (nb['pwned'] was written)")
        why = _plain_problem(nb)
        if why:
            reasons.append(f"nb holds {why}")
        try:
            pickle.dumps(nb)
            copy.deepcopy(nb)
        except Exception as e:  # noqa: BLE001 - any failure of plain-data handling counts
            reasons.append(f"nb cannot be pickled/copied: {type(e).__name__}")
        yield outcomes


def run_case(case: Case, isolation: str = "") -> dict:
    from hr1_jax.patch import compile_patch
    from hr1_jax.patch.errors import PatchError
    kw = dict(case.limits)
    if isolation:
        kw["isolation"] = isolation
    res = {"name": case.name, "cls": case.cls, "expect": case.expect, "isolation": isolation or "default"}
    reasons: list[str] = []
    log: list = []
    ctx = copy.deepcopy(case.ctx if case.ctx is not None else DEFAULT_CTX)
    snapshot = copy.deepcopy(ctx)

    def benign():
        cp = compile_patch(_patch(BENIGN_CODE, "make_pre_hint", "webshop"), "webshop", **kw)
        return _behaviour(cp.call("make_pre_hint", copy.deepcopy(DEFAULT_CTX), {}))

    def victim_run():
        cp = compile_patch(_patch(case.victim, "make_pre_hint", "webshop"), "webshop", **kw)
        nb = {}
        return _behaviour(cp.call("make_pre_hint", copy.deepcopy(DEFAULT_CTX), nb)), nb

    def observer_run():
        cp = compile_patch(_patch(case.observer, case.site, case.benchmark), case.benchmark, **kw)
        return _behaviour(cp.call(case.site, copy.deepcopy(ctx), {}))

    base_benign = benign()
    if base_benign != [("ok", BENIGN_RESULT)]:
        res["verdict"] = "harness error"
        res["reasons"] = [f"benign patch before the case: {base_benign}"]
        return res
    base_victim = victim_run() if case.victim not in (None, "self") else None
    base_observer = observer_run() if case.observer else None

    rss0 = _rss()
    peak_ok = _reset_peak()
    t0 = time.monotonic()
    extra = [(case.site, case.observer)] if case.observer else []
    rejected = False
    cp = None
    try:
        cp = compile_patch(_patch(case.code, case.site, case.benchmark, extra), case.benchmark, **kw)
        res["compile"] = "ok"
    except PatchError as e:
        rejected = True
        res["compile"] = f"rejected: {e}"[:200]
    except BaseException as e:  # noqa: BLE001 - a crash of compile is the finding
        res["compile"] = f"CRASH {type(e).__name__}: {e}"[:200]
        reasons.append(f"compile_patch raised {type(e).__name__} instead of PatchError")
    if cp is not None:
        nb = copy.deepcopy(case.nb) if case.nb is not None else {"keep": "me"}
        episode1 = [_behaviour(o) for o in _run_episode(cp, case, ctx, nb, reasons, log, "first")]
        if case.observer and episode1 and episode1[-1][-1:] != base_observer:
            reasons.append(f"the next hook of the patch saw a changed ctx: {episode1[-1][-1:]} != {base_observer}")
        if case.victim == "self":
            cp2 = compile_patch(_patch(case.code, case.site, case.benchmark, extra), case.benchmark, **kw)
            nb2 = copy.deepcopy(case.nb) if case.nb is not None else {"keep": "me"}
            episode2 = [_behaviour(o) for o in _run_episode(cp2, case, ctx, nb2, reasons, log, "second")]
            if episode2 != episode1:
                reasons.append(f"a fresh episode behaves differently: {str(episode2)[:160]} != {str(episode1)[:160]}")
        if ctx != snapshot:
            reasons.append("the caller's ctx was changed")
    res["case_s"] = round(time.monotonic() - t0, 2)
    rss1 = _rss()
    peak = _status_kb("VmHWM") * 1024 if peak_ok else rss1
    res["host_rss_growth_mb"] = round((rss1 - rss0) / 2**20, 1)
    res["host_peak_growth_mb"] = round((peak - rss0) / 2**20, 1)
    if rss1 - rss0 > HOST_GROWTH_LIMIT:
        reasons.append(f"host RSS grew by {(rss1 - rss0) >> 20} MB")
    if peak - rss0 > HOST_GROWTH_LIMIT:
        reasons.append(f"host RSS peaked {(peak - rss0) >> 20} MB above the start")
    try:
        after = benign()
        if after != base_benign:
            reasons.append(f"benign reference patch afterwards: {after}")
    except BaseException as e:  # noqa: BLE001
        reasons.append(f"benign reference patch afterwards raised {type(e).__name__}: {e}"[:200])
    if base_victim is not None:
        try:
            after_victim = victim_run()
            if after_victim != base_victim:
                reasons.append(f"victim patch behaves differently: {str(after_victim)[:200]} "
                               f"!= {str(base_victim)[:200]}")
        except BaseException as e:  # noqa: BLE001
            reasons.append(f"victim patch afterwards raised {type(e).__name__}: {e}"[:200])
    res["log"] = log[:8]
    res["reasons"] = reasons
    res["verdict"] = "NOT contained" if reasons else ("rejected" if rejected else "contained")
    return res


def _limit_self() -> None:
    import resource
    with open("/proc/self/statm") as f:
        vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = vm + CHILD_AS_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# Self-tests of the harness (not hostile cases): the safety net must see each of these.
SELF_TESTS = {
    "selftest_marker": Case("selftest_marker", "selftest", src("WIN")),
    "selftest_clean": Case("selftest_clean", "selftest", src("return {'message': 'fine'}")),
}


def _self_test(name: str) -> dict | None:
    if name == "selftest_hang":
        time.sleep(600)
    if name == "selftest_host_bomb":
        blob = b"x" * (512 * 2**20)  # touched pages: RSS grows, the parent must kill us
        time.sleep(600)
        return {"name": name, "verdict": "contained", "reasons": [], "len": len(blob)}
    return None


def child_main() -> None:
    name, out_path, isolation = sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""
    import hr1_jax.patch  # noqa: F401  (imports before the limit)
    _limit_self()
    try:
        res = _self_test(name) or run_case(SELF_TESTS.get(name) or CASES_BY_NAME[name], isolation)
    except BaseException as e:  # noqa: BLE001 - e.g. MemoryError of the host under our own limit
        res = {"name": name, "verdict": "NOT contained", "reasons": [f"host raised {type(e).__name__}: {e}"[:300]]}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(res, f, default=repr, ensure_ascii=True)


# --------------------------------------------------------------------------- parent side

def _proc_rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def run_isolated(name: str, isolation: str | None = None, limit_s: float | None = None,
                 rss_kill: int = CHILD_RSS_KILL) -> dict:
    """Run one case in a fresh child (own session); kill it on a hang or a memory blow-up."""
    isolation = os.environ.get("HR1_HOSTILE_ISOLATION", "") if isolation is None else isolation
    limit_s = CASE_LIMIT_S if limit_s is None else limit_s
    fd, out_path = tempfile.mkstemp(prefix="hostile-", suffix=".json")
    os.close(fd)
    err = tempfile.TemporaryFile()
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-c", "from tests.patch.hostile_cases import child_main; child_main()", name, out_path,
           isolation]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    killed = ""
    peak = 0
    try:
        while proc.poll() is None:
            rss = _proc_rss(proc.pid)
            peak = max(peak, rss)
            if rss > rss_kill:
                killed = f"host RSS reached {rss >> 20} MB: killed"
            elif time.monotonic() - start > limit_s:
                killed = f"hung: still running after {limit_s:.0f}s, killed"
            if killed:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait()
                break
            time.sleep(0.02)
        wall = time.monotonic() - start
        try:
            with open(out_path, encoding="utf-8") as f:
                res = json.load(f)
        except (OSError, ValueError):
            err.seek(0)
            tail = err.read()[-600:].decode("utf-8", "replace")
            why = killed or f"host process died ({_exit_text(proc.returncode)})"
            res = {"name": name, "verdict": "NOT contained", "reasons": [why], "stderr_tail": tail}
        res["wall_s"] = round(wall, 2)
        res["parent_seen_peak_mb"] = peak >> 20
        return res
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
        err.close()
        try:
            os.unlink(out_path)
        except OSError:
            pass


def _exit_text(code) -> str:
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def allowed_verdicts(case: Case) -> set:
    return {"rejected"} if case.expect == "rejected" else {"contained", "rejected"}


def describe(res: dict) -> str:
    lines = [f"{res.get('name')}: {res.get('verdict')} (compile: {res.get('compile', '-')}, wall {res.get('wall_s')}s, "
             f"host peak +{res.get('host_peak_growth_mb', '?')} MB)"]
    lines += [f"  - {r}" for r in res.get("reasons", [])]
    for entry in res.get("log", [])[:3]:
        lines.append(f"  call {entry['episode']}#{entry['call']} {entry['wall_s']}s: " + "; ".join(
            f"{o['status']}{' killed' if o['killed'] else ''} {str(o['result'])[:60]} {o['error'][:100]}"
            for o in entry["outcomes"]))
    if res.get("stderr_tail"):
        lines.append("  stderr: " + res["stderr_tail"].strip().replace("\n", " | ")[-300:])
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    isolation = ""
    if "--isolation" in argv:
        i = argv.index("--isolation")
        isolation = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    names = argv or [c.name for c in CASES]
    bad = 0
    for name in names:
        case = CASES_BY_NAME[name]
        res = run_isolated(name, isolation)
        ok = res.get("verdict") in allowed_verdicts(case)
        bad += not ok
        print(("PASS " if ok else "FAIL ") + f"[{case.cls}] " + describe(res), flush=True)
    print(f"{len(names) - bad}/{len(names)} as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
