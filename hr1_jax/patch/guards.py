"""Run-time guards injected into sandboxed hook code (our addition over the reference sandbox).

The statement ticks of the line budget cannot see work done inside one C call (`'x' * 10**9`,
`list(range(10**9))`, `10**10**8`, `','.join([s] * 10**6)`), so `sandbox.py` rewrites the risky
operators, method calls and f-string fields of hook code into the checked helpers below, and
hooks see size-capped stand-ins for `range`, `round`, `sum`, `sorted`, `zip`, `str`, `list`,
`tuple`, `set`, `dict`, `math` and `re` (the type stand-ins keep `isinstance` working).
Every helper raises `HookMemoryError` (a BaseException, so hook-level `except Exception` cannot
swallow it) before an oversized object is built. Allocations above `CHARGE_MIN` units are also
charged to a per-call budget held in a thread-local set by the runner.

This module also holds the read-only ctx containers (`FrozenDict`, `FrozenList`).
"""
from __future__ import annotations

import contextvars
import copy
import difflib
import itertools
import math
import os
import re
import string
import time
import types
from re import _parser as _sre_parser

import regex

# Caps (units: characters for strings, elements for containers, bits for ints).
MAX_SEQ = 1_000_000          # largest single string/list a hook may build
MAX_INT_BITS = 1 << 17       # ~39k decimal digits
MAX_REPR = 250_000           # largest str()/repr()/format of a non-string object
MAX_RANGE = 100_000          # longest range(); C consumers (sum/list/sorted) see no line events
ALLOC_BUDGET = 16_000_000    # per call, summed over large allocations
CHARGE_MIN = 4096            # smaller results are not charged
MAX_FORMAT_WIDTH = 10_000    # width/precision in %-, format- and f-string specs
MAX_RE_SUBJECT = 100_000     # longest string a regex may scan
MAX_RE_PATTERN = 20_000
MAX_ROUND_DIGITS = 1_000
MAX_RSS_GROWTH = 256 * 2**20  # bytes one hook call may add to the process (safety net)
MAX_CALL_DEPTH = 100          # nested calls of hook functions
CHECK_EVERY_LINES = 64        # the wall clock is sampled every 64 counted statements ...
RSS_EVERY_S = 0.0005          # ... and RSS (a /proc read, ~1-4 us) when this much time has passed
MAX_MATCHER_WORK = 2_000_000  # len(a) * len(b) of one SequenceMatcher comparison


class HookBudgetExceeded(BaseException):
    """Base of the runner's stop signals; BaseException so `except Exception` cannot catch it."""


class HookTimeout(HookBudgetExceeded):
    pass


class HookMemoryError(HookBudgetExceeded):
    pass


class _Rss:
    """Resident set size of this process in bytes (Linux /proc; None elsewhere). The descriptor
    is reopened after a fork, where /proc/self would still name the parent."""
    fd = None
    pid = None

    @classmethod
    def read(cls) -> int | None:
        try:
            if cls.pid != os.getpid():
                cls.fd, cls.pid = os.open("/proc/self/statm", os.O_RDONLY), os.getpid()
            return int(os.pread(cls.fd, 128, 0).split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            return None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
rss_bytes = _Rss.read


def rss_bytes_of(pid: int) -> int | None:
    """Resident set size of process `pid` in bytes (Linux /proc; None where it cannot be read)."""
    try:
        with open(f"/proc/{int(pid)}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None


class CallBudget:
    """Per-call budget; the runner installs one per hook call (`set_budget`).

    `lines_left` counts statements executed by hook code (ticks inserted by the sandbox's
    rewrite), `alloc_left` large allocations and C-level work charged by the guards: both are
    deterministic, so a hook's fate does not depend on machine load. `deadline` is only the far
    wall-clock safety net (a time.perf_counter() value; also bounds regex calls). A tick only
    subtracts and compares with `next_check`; the clock is looked at every CHECK_EVERY_LINES
    statements and whenever the line budget is exhausted, RSS at such a checkpoint once
    RSS_EVERY_S has passed since the last look. Memory grows a few MB per millisecond at most, so
    the call's first look is a fair baseline and a call that adds MAX_RSS_GROWTH is looked at
    many times on the way; a short call never pays for /proc."""

    __slots__ = ("alloc_left", "lines_left", "line_budget", "deadline", "rss0", "rss_at", "next_check", "depth")

    def __init__(self, alloc: int = ALLOC_BUDGET, deadline: float | None = None,
                 line_budget: int | None = None):
        self.alloc_left = alloc
        self.line_budget = line_budget
        self.lines_left = line_budget if line_budget is not None else 1 << 62
        self.deadline = deadline if deadline is not None else math.inf
        self.rss0 = None
        self.rss_at = time.perf_counter() + RSS_EVERY_S
        self.next_check = max(self.lines_left - CHECK_EVERY_LINES, 0)
        self.depth = 0


# The current call's budget, per thread (a thread starts in an empty context, so it sees none
# of another thread's budget). Every tick reads it: a ContextVar's get costs a third of a
# threading.local attribute read (~25 vs ~75 ns).
_BUDGET: contextvars.ContextVar = contextvars.ContextVar("hr1_hook_budget", default=None)
current_budget = _BUDGET.get


def set_budget(budget: CallBudget | None) -> CallBudget | None:
    prev = current_budget()
    _BUDGET.set(budget)
    return prev


def _charge(n: int, what: str) -> None:
    if n > MAX_SEQ:
        raise HookMemoryError(f"{what} would build {n} items (cap {MAX_SEQ})")
    if n >= CHARGE_MIN:
        charge_work(n, what)


def charge_work(n: int, what: str) -> None:
    """Charge `n` units of C-level work or allocation to the current call (deterministic)."""
    b = current_budget()
    if b is not None:
        b.alloc_left -= n
        if b.alloc_left < 0:
            raise HookMemoryError(f"hook allocated or scanned more than {ALLOC_BUDGET} units in one call ({what})")


# --------------------------------------------------------------------------- statement ticks
# The sandbox's rewrite puts `_g_tick(n)` at the head of every statement list of hook code (n =
# its statements; +1 in a loop body for the loop header) and wraps comprehension iterables in
# `_g_iter`. Counting in the hook's own code, not in a tracer, means no hook can switch the count
# off, and the count is the same on an idle and on a loaded machine. Once exceeded, every later
# tick raises again, so an error swallowed somewhere in C is raised at the next statement.

def _checkpoint(b: CallBudget) -> None:
    """The slow part of a tick, every CHECK_EVERY_LINES statements: budget, clock, RSS."""
    if b.lines_left < 0:
        raise HookTimeout(f"line budget of {b.line_budget} exceeded")
    b.next_check = max(b.lines_left - CHECK_EVERY_LINES, 0)  # 0: the first overdraft always lands here
    now = time.perf_counter()
    if now >= b.rss_at:
        b.rss_at = now + RSS_EVERY_S
        rss = rss_bytes()
        if b.rss0 is None:
            b.rss0 = rss
        elif rss is not None and rss - b.rss0 > MAX_RSS_GROWTH:
            raise HookMemoryError(f"process memory grew by {(rss - b.rss0) >> 20} MiB during the hook")
    if now > b.deadline:
        raise HookTimeout("wall-clock safety net exceeded")


def g_tick(n: int) -> None:
    b = current_budget()
    if b is not None:
        b.lines_left = left = b.lines_left - n  # one attribute read fewer than `-=` and a reread
        if left < b.next_check:
            _checkpoint(b)


def g_enter(n: int) -> None:
    """Entry of a hook function: its first tick, and one call level more."""
    b = current_budget()
    if b is not None:
        b.depth += 1
        b.lines_left -= n
        if b.depth > MAX_CALL_DEPTH:
            raise HookMemoryError(f"call depth above {MAX_CALL_DEPTH}")
        if b.lines_left < b.next_check:
            _checkpoint(b)


def g_exit() -> None:
    b = current_budget()
    if b is not None:
        b.depth -= 1


def g_iter(iterable):
    """A comprehension's iterable: one statement tick per item drawn."""
    b = current_budget()  # hook objects cannot outlive their call (nb holds plain data only)
    if b is None:
        yield from iterable
        return
    for item in iterable:
        b.lines_left -= 1
        if b.lines_left < b.next_check:
            _checkpoint(b)
        yield item


def _len(x):
    try:
        return len(x)
    except Exception:
        return None


_SEQ_TYPES = (str, bytes, list, tuple)
# Exact types for the fast path of repr_size (FrozenDict/FrozenList are defined below).
_FLAT_CONTAINERS: set = {list, tuple, set, frozenset}
_DICTS: set = {dict}


# --------------------------------------------------------------------------- size estimation

def repr_size(obj, limit: int) -> int:
    """Upper-bound-ish size of `str(obj)`/`repr(obj)`, walking at most until `limit` is passed.
    Shared sub-objects are counted every time they occur (their text repeats, so `x = [x, x]`
    nested 40 deep is huge); cycles simply run into the limit. Iterative; stops as soon as the
    running total passes `limit`."""
    total, stack = 0, [obj]
    pop, extend = stack.pop, stack.extend
    while stack:
        x = pop()
        t = type(x)
        if t is str or t is bytes:
            total += len(x) + 3
        elif t in _FLAT_CONTAINERS:
            total += 2 + 2 * len(x)
            extend(x)
        elif t in _DICTS:
            total += 2 + 4 * len(x)
            extend(x.keys())
            extend(x.values())
        elif t is int:
            total += x.bit_length() // 3 + 2
        elif t is float or t is bool or x is None:
            total += 24
        elif isinstance(x, BaseException):
            total += 40
            extend(x.args)
        elif isinstance(x, (str, bytes)):
            total += len(x) + 3
        elif isinstance(x, (list, tuple, set, frozenset, dict)):
            total += 2 + 2 * len(x)
            extend(x.values() if isinstance(x, dict) else x)
        else:
            total += 120
        if total > limit:
            return total
    return total


def _check_repr(obj, what: str) -> None:
    n = repr_size(obj, MAX_REPR)
    if n > MAX_REPR:
        raise HookMemoryError(f"{what} would build about {n}+ characters (cap {MAX_REPR})")
    _charge(n, what)


# --------------------------------------------------------------------------- operators

def g_add(a, b):
    t = type(a)
    if t is int or t is float:
        return a + b
    if isinstance(a, _SEQ_TYPES) and isinstance(b, _SEQ_TYPES):
        n = len(a) + len(b)
        if n >= CHARGE_MIN:
            _charge(n, "+")
    return a + b


def g_iadd(a, b):
    if isinstance(a, _SEQ_TYPES):
        lb = _len(b)
        if lb is not None:
            _charge(len(a) + lb, "+=")
    a += b
    return a


def _seq_times(a, b, op):
    if isinstance(a, _SEQ_TYPES) and isinstance(b, int):
        _charge(len(a) * max(b, 0), op)
    elif isinstance(b, _SEQ_TYPES) and isinstance(a, int):
        _charge(len(b) * max(a, 0), op)
    elif isinstance(a, int) and isinstance(b, int):
        if a.bit_length() + b.bit_length() > MAX_INT_BITS:
            raise HookMemoryError(f"integer product exceeds {MAX_INT_BITS} bits")


def g_mul(a, b):
    _seq_times(a, b, "*")
    return a * b


def g_imul(a, b):
    _seq_times(a, b, "*=")
    a *= b
    return a


def g_pow(a, b):
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
        if (abs(a).bit_length() - 1) * b > MAX_INT_BITS:
            raise HookMemoryError(f"integer power exceeds {MAX_INT_BITS} bits")
    return a ** b


def g_lshift(a, b):
    if isinstance(a, int) and isinstance(b, int) and a and b > 0:
        if a.bit_length() + b > MAX_INT_BITS:
            raise HookMemoryError(f"left shift exceeds {MAX_INT_BITS} bits")
    return a << b


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([a-zA-Z%])")


def _check_percent_format(fmt) -> None:
    text = fmt if isinstance(fmt, str) else fmt.decode("latin-1")
    for m in _PERCENT_SPEC.finditer(text):
        for part in (m.group(1), m.group(2)):
            if part == "*":
                raise HookMemoryError("'*' width in %-format is not allowed")
            if part and (len(part) > 6 or int(part) > MAX_FORMAT_WIDTH):
                raise HookMemoryError(f"%-format width above {MAX_FORMAT_WIDTH}")


def g_mod(a, b):
    if isinstance(a, (str, bytes)):
        _check_percent_format(a)
        _check_repr(b, "%")
        _charge(len(a), "%")
    return a % b


def g_imod(a, b):
    return g_mod(a, b)


# --------------------------------------------------------------------------- formatting

_SPEC = re.compile(r"^(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[,_]?(?:\.(\d+))?[a-zA-Z%]?$", re.S)


def _check_spec(spec: str) -> None:
    if not spec:
        return
    m = _SPEC.match(spec)
    if m is None:
        return  # format() rejects it itself
    for part in m.groups():
        if part and (len(part) > 6 or int(part) > MAX_FORMAT_WIDTH):
            raise HookMemoryError(f"format width/precision above {MAX_FORMAT_WIDTH}")


def g_fv(value, conversion: int, spec):
    """f-string field `{value!conv:spec}`: checks the spec and the size of the converted value."""
    if conversion == 115:      # !s
        value = SafeStr(value)
    elif conversion in (114, 97):  # !r, !a
        _check_repr(value, "f-string !r")
        value = repr(value) if conversion == 114 else ascii(value)
    if not isinstance(spec, str):
        spec = ""
    _check_spec(spec)
    if not isinstance(value, (str, int, float, bool)) and value is not None:
        _check_repr(value, "f-string field")
    return format(value, spec)


class _SafeFormatter(string.Formatter):
    """str.format without attribute access in fields (`{0.__class__}`) and with size checks."""

    def get_field(self, field_name, args, kwargs):
        if "." in field_name or "[_" in field_name:
            raise ValueError("attribute access in format fields is not allowed")
        return super().get_field(field_name, args, kwargs)

    def convert_field(self, value, conversion):
        if conversion in ("r", "a", "s"):
            _check_repr(value, "format conversion")
        return super().convert_field(value, conversion)

    def format_field(self, value, format_spec):
        _check_spec(format_spec)
        if not isinstance(value, (str, int, float, bool)) and value is not None:
            _check_repr(value, "format field")
        out = format(value, format_spec)
        _charge(len(out), "format")
        return out


_FORMATTER = _SafeFormatter()


# --------------------------------------------------------------------------- attribute calls

def _str_join(sep, items):
    items = list(items)
    _charge(len(items), "join")
    total = len(sep) * max(len(items) - 1, 0)
    for it in items:
        n = _len(it)
        if n is not None:
            total += n
            if total > MAX_SEQ:
                break
    _charge(total, "join")
    return sep.join(items)


def g_fstr(parts):
    """Body of a rewritten f-string: total length checked before joining."""
    return _str_join("", parts)


def _pad(name):
    def padded(obj, width, *rest):
        if isinstance(width, int):
            _charge(width, name)
        return getattr(obj, name)(width, *rest)
    return padded


def _expandtabs(obj, tabsize=8):
    if isinstance(tabsize, int):
        _charge(len(obj) * max(tabsize, 1), "expandtabs")
    return obj.expandtabs(tabsize)


def _replace(obj, old, new, count=-1):
    if isinstance(old, (str, bytes)) and isinstance(new, (str, bytes)) and len(new) > len(old):
        hits = obj.count(old) if old else len(obj) + 1
        if isinstance(count, int) and count >= 0:
            hits = min(hits, count)
        _charge(len(obj) + hits * (len(new) - len(old)), "replace")
    return obj.replace(old, new, count)


def _translate(obj, table):
    values = table.values() if isinstance(table, dict) else table if isinstance(table, (list, tuple)) else None
    if values is None and not isinstance(obj, bytes):
        raise TypeError("translate() table must be a dict, list or tuple")
    if values is not None:
        longest = max([_len(v) or 1 for v in itertools.islice(values, MAX_RANGE)], default=1)
        _charge(len(obj) * longest, "translate")
    return obj.translate(table)


def _format(obj, *args, **kwargs):
    if not isinstance(obj, str):
        return obj.format(*args, **kwargs)  # raises AttributeError for bytes
    return _FORMATTER.vformat(obj, args, kwargs)


def _format_map(obj, mapping):
    if not isinstance(obj, str):
        return obj.format_map(mapping)
    return _FORMATTER.vformat(obj, (), mapping)


# Checked versions of the str/bytes methods that can build outputs much larger than their inputs.
_STR_CALLS = {
    "join": _str_join, "ljust": _pad("ljust"), "rjust": _pad("rjust"), "center": _pad("center"),
    "zfill": _pad("zfill"), "expandtabs": _expandtabs, "replace": _replace, "translate": _translate,
    "format": _format, "format_map": _format_map,
}


def _list_extend(obj, items):
    n = _len(items)
    if n is None:
        items = list(itertools.islice(items, MAX_SEQ + 1))
        n = len(items)
    _charge(len(obj) + n, "extend")
    return obj.extend(items)


MUTATORS = frozenset({
    "update", "setdefault", "pop", "popitem", "clear", "append", "extend", "insert", "remove",
    "sort", "reverse", "add", "discard", "difference_update", "intersection_update",
    "symmetric_difference_update",
})
SIZE_GUARDED_ATTRS = frozenset(_STR_CALLS) | {"extend"}
# Names whose unbound use on a builtin type (`dict.update(ctx, ...)`, `str.join(sep, xs)`) is routed
# through g_attr; instance mutators need no guard (ctx containers refuse writes themselves).
TYPE_GUARDED_ATTRS = SIZE_GUARDED_ATTRS | MUTATORS
TYPE_NAMES = frozenset({"dict", "list", "set", "str", "tuple", "frozenset"})


def g_call(obj, name, *args, **kwargs):
    """`obj.name(*args, **kwargs)` for name in SIZE_GUARDED_ATTRS (rewritten method calls)."""
    t = type(obj)
    if t is str or t is bytes:
        return _STR_CALLS[name](obj, *args, **kwargs)
    if name == "extend" and isinstance(obj, list):
        return _list_extend(obj, *args, **kwargs)
    if isinstance(obj, type):
        return g_attr(obj, name)(*args, **kwargs)
    if isinstance(obj, (str, bytes)):
        return _STR_CALLS[name](obj, *args, **kwargs)
    return getattr(obj, name)(*args, **kwargs)


def g_attr(obj, name):
    """`obj.name` used as a value (not called on the spot), or unbound on a builtin type."""
    value = getattr(obj, name)
    if isinstance(obj, type):
        def unbound(self_, *args, **kwargs):
            if name in MUTATORS and isinstance(self_, (FrozenDict, FrozenList)):
                raise TypeError("ctx is read-only")
            if not isinstance(self_, obj) or name not in SIZE_GUARDED_ATTRS:
                return value(self_, *args, **kwargs)
            return g_call(self_, name, *args, **kwargs)
        return unbound
    if name in SIZE_GUARDED_ATTRS and (isinstance(obj, (str, bytes)) or (name == "extend" and isinstance(obj, list))):
        return lambda *args, **kwargs: g_call(obj, name, *args, **kwargs)
    return value


def g_star(value):
    """`*value` / `**value` in displays and calls: charge the unpacked size."""
    n = _len(value)
    if n is None:
        value = list(itertools.islice(value, MAX_SEQ + 1))
        n = len(value)
    _charge(n, "unpacking")
    return value


# --------------------------------------------------------------------------- builtins

class _TypeMeta(type):
    """`isinstance(v, str)`, `isinstance(v, list)` etc. keep working when the name is one of the
    checked stand-ins below (each subclasses the real type it stands for)."""

    def __instancecheck__(cls, inst):
        return isinstance(inst, cls.__bases__[0])

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls.__bases__[0])


def g_str(obj="", *args, **kwargs):
    """`str(...)` of hook code: checks the size of obj's text first. The sandbox calls it
    directly where `str` names the stand-in (a metaclass call costs more than the check)."""
    if type(obj) is str and not (args or kwargs):
        return obj  # what str(obj) returns (most calls: a ctx string)
    if isinstance(obj, str):
        return str(obj)
    if args or kwargs:  # str(bytes, encoding[, errors])
        return str(obj, *args, **kwargs)
    _check_repr(obj, "str()")
    return str(obj)


class SafeStr(str, metaclass=_TypeMeta):
    """Stands in for `str` in hook builtins: `str(x)` is `g_str(x)`, `isinstance(v, str)` and
    `str.lower(v)` behave as usual. Never instantiated."""

    def __new__(cls, *args, **kwargs):
        return g_str(*args, **kwargs)


class SafeInt(int, metaclass=_TypeMeta):
    """Stands in for `int`: parsing text in a power-of-two base has no digit limit in CPython,
    so `int('f' * 10**6, 16)` would skip the integer-size cap. Never instantiated."""

    def __new__(cls, x=0, *args, **kwargs):
        if isinstance(x, (str, bytes, bytearray)):
            base = args[0] if args else kwargs.get("base", 10)
            bits_per_digit = math.log2(base) if isinstance(base, int) and base >= 2 else 6
            if len(x) * bits_per_digit > MAX_INT_BITS:
                raise HookMemoryError(f"int() of {len(x)} digits (cap {MAX_INT_BITS} bits)")
        return int(x, *args, **kwargs)


def _materialize(iterable, what: str):
    """Items of `iterable` after charging their count (at most MAX_SEQ + 1 are drawn)."""
    n = _len(iterable)
    if n is None:
        iterable = list(itertools.islice(iterable, MAX_SEQ + 1))
        n = len(iterable)
    _charge(n, what)
    return iterable


def _safe_container(real):
    def __new__(cls, *args, **kwargs):
        if args:
            args = (_materialize(args[0], f"{real.__name__}()"),) + args[1:]
        if kwargs:
            _charge(len(kwargs), f"{real.__name__}()")
        return real(*args, **kwargs)
    return _TypeMeta(f"Safe{real.__name__.title()}", (real,), {"__new__": __new__, "__slots__": ()})


# Stand-ins for the copying constructors: `list(map(list, [r] * 10**5))` would otherwise copy
# 10**10 items inside one C call. Never instantiated (__new__ returns the real type).
SafeList = _safe_container(list)
SafeTuple = _safe_container(tuple)
SafeSet = _safe_container(set)
SafeDict = _safe_container(dict)


def g_sorted(iterable, *args, **kwargs):
    return sorted(_materialize(iterable, "sorted()"), *args, **kwargs)


def g_zip(*iterables, **kwargs):
    # zip(*[big] * n) builds n-tuples: bound the item count n * len before C does the work.
    lens = [_len(it) for it in iterables]
    if len(iterables) > 2:
        sized = [n for n in lens if n is not None]
        if len(sized) < len(lens) and len(iterables) > 8:
            raise HookMemoryError("zip() of more than 8 unsized iterables")
        if sized:
            _charge(len(iterables) * min(sized), "zip()")
    return zip(*iterables, **kwargs)


def g_range(*args):
    r = range(*args)
    if len(r) > MAX_RANGE:
        raise HookMemoryError(f"range of {len(r)} items (cap {MAX_RANGE})")
    return r


def g_round(number, ndigits=None):
    if ndigits is None:
        return round(number)
    if isinstance(ndigits, int) and abs(ndigits) > MAX_ROUND_DIGITS:
        raise HookMemoryError(f"round() ndigits above {MAX_ROUND_DIGITS}")
    return round(number, ndigits)


def g_sum(iterable, start=0):
    if isinstance(start, (int, float, bool)):
        return sum(iterable, start)
    # Sequence concatenation via sum() is quadratic in C: bound it and do it through g_add.
    total = start
    for item in itertools.islice(iterable, MAX_RANGE):
        total = g_add(total, item)
    return total


class ReadOnlyNamespace(types.SimpleNamespace):
    """The `math` / `re` stand-ins: one object serves every hook of a process, so none may
    change it for the others (the sandbox also rejects attribute assignment)."""

    def __setattr__(self, name, value):
        raise AttributeError(f"{name} is read-only")

    def __delattr__(self, name):
        raise AttributeError(f"{name} is read-only")


class SafeSequenceMatcher(difflib.SequenceMatcher):
    """difflib's matcher with its quadratic work bounded and charged: its Python frames run
    without statement ticks, so the sizes are checked before any comparison."""

    def set_seq1(self, a):
        self._check(a, getattr(self, "b", None))
        super().set_seq1(a)

    def set_seq2(self, b):
        self._check(getattr(self, "a", None), b)
        super().set_seq2(b)

    @staticmethod
    def _check(a, b) -> None:
        work = (_len(a) or 0) * (_len(b) or 0)
        if work > MAX_MATCHER_WORK:
            raise HookMemoryError(f"SequenceMatcher over {work} pairs (cap {MAX_MATCHER_WORK})")
        charge_work(work, "SequenceMatcher")


def _make_math():
    ns = {k: getattr(math, k) for k in dir(math) if not k.startswith("_")}

    def factorial(n):
        if isinstance(n, int) and n > 5000:
            raise HookMemoryError("math.factorial argument above 5000")
        return math.factorial(n)

    def comb(n, k):
        if isinstance(n, int) and n > MAX_INT_BITS:
            raise HookMemoryError("math.comb argument too large")
        return math.comb(n, k)

    def perm(n, k=None):
        k_eff = n if k is None else k
        if isinstance(n, int) and isinstance(k_eff, int) and k_eff > 0 and k_eff * max(1, n.bit_length()) > MAX_INT_BITS:
            raise HookMemoryError("math.perm result too large")
        return math.perm(n, k)

    def prod(iterable, start=1):
        total = start
        for item in itertools.islice(iterable, MAX_RANGE + 1):
            total = g_mul(total, item)
        return total

    def lcm(*ints):
        total = 1
        for item in ints[:MAX_RANGE]:
            g_mul(total, item)
            total = math.lcm(total, item)
        return total

    ns.update(factorial=factorial, comb=comb, perm=perm, prod=prod, lcm=lcm)
    return ReadOnlyNamespace(**ns)


SAFE_MATH = _make_math()


# --------------------------------------------------------------------------- re
# Hooks call `re.*` on a stand-in backed by the `regex` package (VERSION0, i.e. `re` semantics),
# because its matcher honours a timeout: polynomial backtracking such as `a.*b` on 10**5 chars
# runs inside one C call where no statement tick can interrupt it. Each call gets what is left of
# the hook's wall-clock safety net and charges its subject length to the work budget; nested
# unbounded quantifiers (the classic exponential shape) are refused outright.

_RE_CACHE: dict = {}
_REPEATS = (_sre_parser.MAX_REPEAT, _sre_parser.MIN_REPEAT) + (
    (_sre_parser.POSSESSIVE_REPEAT,) if hasattr(_sre_parser, "POSSESSIVE_REPEAT") else ())
DEFAULT_RE_TIMEOUT = 2.0  # outside a budgeted call (the runner always sets one)


def _walk_repeats(items, inside_unbounded: bool) -> str:
    for op, av in items:
        if op in _REPEATS:
            lo, hi, sub = av
            if inside_unbounded and hi > 1:
                return "nested quantifiers (catastrophic backtracking)"
            why = _walk_repeats(sub, inside_unbounded or hi > 100)
        elif op is _sre_parser.SUBPATTERN:
            why = _walk_repeats(av[-1], inside_unbounded)
        elif op is _sre_parser.BRANCH:
            why = next((w for w in (_walk_repeats(alt, inside_unbounded) for alt in av[1]) if w), "")
        elif op in (_sre_parser.ASSERT, _sre_parser.ASSERT_NOT):
            why = _walk_repeats(av[1], inside_unbounded)
        elif getattr(_sre_parser, "ATOMIC_GROUP", None) is op:
            why = _walk_repeats(av, inside_unbounded)
        else:
            why = ""
        if why:
            return why
    return ""


def _check_pattern(pattern, flags) -> None:
    if not isinstance(pattern, (str, bytes)):
        return  # the matcher raises its own TypeError
    if len(pattern) > MAX_RE_PATTERN:
        raise HookMemoryError(f"regex pattern longer than {MAX_RE_PATTERN}")
    key = (type(pattern), pattern, flags)
    why = _RE_CACHE.get(key)
    if why is None:
        try:
            why = _walk_repeats(_sre_parser.parse(pattern, flags if isinstance(flags, int) else 0), False)
        except Exception:
            why = ""  # invalid pattern: the matcher reports it when called
        if len(_RE_CACHE) > 2048:
            _RE_CACHE.clear()
        _RE_CACHE[key] = why
    if why:
        raise HookMemoryError(f"regex rejected: {why}")


def _check_subject(s) -> None:
    if isinstance(s, (str, bytes)):
        if len(s) > MAX_RE_SUBJECT:
            raise HookMemoryError(f"regex subject longer than {MAX_RE_SUBJECT}")
        charge_work(len(s), "regex scan")


def _timeout() -> float:
    """The regex matcher's own timeout: what is left of the call's wall-clock safety net."""
    b = current_budget()
    if b is None or b.deadline == math.inf:
        return DEFAULT_RE_TIMEOUT
    return max(0.001, b.deadline - time.perf_counter())


def _timed(fn, *args, **kwargs):
    kwargs["timeout"] = _timeout()
    try:
        return fn(*args, **kwargs)
    except TimeoutError:
        raise HookTimeout("regex ran past the hook's wall-clock budget") from None


def _re_scan(fn, flags_pos: int):
    def scan(pattern, string, *args, **kwargs):
        _check_pattern(pattern, kwargs.get("flags", args[flags_pos] if len(args) > flags_pos else 0))
        _check_subject(string)
        return _timed(fn, pattern, string, *args, **kwargs)
    scan.__name__ = fn.__name__
    return scan


def _charged_replacement(repl):
    """A callable `re.sub` replacement whose every returned piece is charged: the pieces are
    joined in one C call (returning `m.string` 2000 times built 0.77 GB)."""
    def charged(match):
        piece = repl(match)
        n = _len(piece) or 0
        if n > MAX_SEQ:
            raise HookMemoryError(f"re.sub replacement of {n} items (cap {MAX_SEQ})")
        charge_work(n, "re.sub replacement")
        return piece
    return charged


def _re_sub(fn):
    def sub(pattern, repl, string, *args, **kwargs):
        flags = kwargs.get("flags", args[1] if len(args) > 1 else 0)
        _check_pattern(pattern, flags)
        _check_subject(string)
        if callable(repl):
            repl = _charged_replacement(repl)
        if isinstance(repl, (str, bytes)) and isinstance(string, (str, bytes)):
            hits = len(string) + 1
            count = kwargs.get("count", args[0] if args else 0)
            if isinstance(count, int) and count > 0:
                hits = min(hits, count)
            per_hit = len(repl) + repl.count("\\" if isinstance(repl, str) else b"\\") * len(string)
            if hits * per_hit > MAX_SEQ:
                # The bound is loose; count the real matches before refusing.
                found = _timed(regex.finditer, pattern, string, flags=flags or 0)
                try:
                    hits = sum(1 for _ in itertools.islice(found, hits))
                except TimeoutError:
                    raise HookTimeout("regex ran past the hook's wall-clock budget") from None
            _charge(len(string) + hits * per_hit, "re.sub")
        return _timed(fn, pattern, repl, string, *args, **kwargs)
    sub.__name__ = fn.__name__
    return sub


def _make_re():
    ns = {name: getattr(re, name) for name in (
        "A", "ASCII", "I", "IGNORECASE", "L", "LOCALE", "M", "MULTILINE", "S", "DOTALL", "U",
        "UNICODE", "X", "VERBOSE", "escape")}
    for name in ("match", "fullmatch", "search", "findall", "finditer"):
        ns[name] = _re_scan(getattr(regex, name), 0)
    ns["split"] = _re_scan(regex.split, 1)
    for name in ("sub", "subn"):
        ns[name] = _re_sub(getattr(regex, name))
    return ReadOnlyNamespace(**ns)


SAFE_RE = _make_re()


# --------------------------------------------------------------------------- read-only ctx

def _read_only(*_args, **_kwargs):
    raise TypeError("ctx is read-only")


class FrozenDict(dict):
    """Read-only dict that also allows attribute reads (`ctx.state.page_type`).
    Copies (`copy.deepcopy`, pickle, `.copy()`) are plain dicts."""

    __slots__ = ()

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    __setitem__ = __delitem__ = __setattr__ = __delattr__ = __ior__ = _read_only
    update = setdefault = pop = popitem = clear = _read_only

    def __deepcopy__(self, memo):
        return {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self):
        return dict, (dict(self),)


class FrozenList(list):
    """Read-only list; copies are plain lists."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = remove = pop = clear = sort = reverse = _read_only

    def __deepcopy__(self, memo):
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self):
        return list, (list(self),)


_FLAT_CONTAINERS.add(FrozenList)
_DICTS.add(FrozenDict)


_SHARED_SCALARS = frozenset({str, int, float, bool, type(None)})
_dict_set = dict.__setitem__  # past FrozenDict's read-only __setitem__, while it is built


def freeze(value):
    """Deep copy of `value` into read-only containers (dict -> FrozenDict, list -> FrozenList,
    set -> frozenset); scalars are shared, other objects deep-copied. Scalar items are taken
    in place (most of a ctx is scalars: one call fewer each)."""
    t = type(value)
    scalars = _SHARED_SCALARS
    if t is dict:  # the common containers first, by exact type (a loop: no comprehension frame)
        out = FrozenDict(value)  # copied in C; only the containers among the values replaced
        for k, v in value.items():
            tv = type(v)
            if tv not in scalars:  # a list of scalars (most ctx lists) copied here, without a call
                _dict_set(out, k, FrozenList(v) if tv is list and scalars.issuperset(map(type, v)) else freeze(v))
        return out
    if t is list:  # all-scalar lists (most of them) copied in C
        if scalars.issuperset(map(type, value)):
            return FrozenList(value)
        return FrozenList([v if type(v) in scalars else freeze(v) for v in value])
    if t in scalars:
        return value
    if isinstance(value, dict):
        return FrozenDict({k: v if type(v) in scalars else freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return FrozenList([v if type(v) in scalars else freeze(v) for v in value])
    if isinstance(value, tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(freeze(v) for v in value)
    if isinstance(value, (str, int, float)):
        return value
    return copy.deepcopy(value)


# --------------------------------------------------------------------------- nb hygiene

_DATA_SCALARS = frozenset({int, float, bool, type(None)})
MAX_NB_DEPTH = 32


def inspect_nb(nb: dict, limit: int) -> str:
    """'' if nb holds only plain data of total size <= limit, nested at most MAX_NB_DEPTH deep,
    else the reason. Keeps host code that later logs, copies or pickles nb safe from giant or
    deeply nested values and from live hook objects (generators, functions) that would run hook
    code outside the budget. Shared sub-objects count each time they occur (serialising nb
    repeats them); cycles run into the limit."""
    if type(nb) is dict:  # a flat nb of scalars (the common case): only its size can be wrong, counted as below
        total = 8 * len(nb) + 4
        for x in itertools.chain(nb, nb.values()):  # a loop: type() here is cheaper than map(type, ...)
            t = type(x)
            if t is str:
                total += len(x)
            elif t in _SHARED_SCALARS:
                total += 4
            else:
                break  # a container or an object: the walk below
        else:
            return f"nb grew beyond {limit} units" if total > limit else ""
    total, stack = 0, [(nb, 0)]
    pop, append = stack.pop, stack.append
    while stack:
        x, depth = pop()
        t = type(x)
        if t is str or t is bytes:
            total += len(x)
        elif t in _FLAT_CONTAINERS or t in _DICTS:
            if depth >= MAX_NB_DEPTH:
                return f"nb is nested deeper than {MAX_NB_DEPTH} levels"
            items = itertools.chain(x.keys(), x.values()) if t in _DICTS else x
            total += (8 if t in _DICTS else 4) * len(x) + 4  # slots weigh more than chars
            if total > limit:
                return f"nb grew beyond {limit} units"
            for item in items:
                append((item, depth + 1))
        elif t in _DATA_SCALARS:
            total += 4
        else:
            return f"nb holds a non-data value of type {t.__name__}"
        if total > limit:
            return f"nb grew beyond {limit} units"
    return ""
