"""Running one compiled hook under budgets (reference spec §3.2) and normalising its return (§2.4).

Budgets, enforced by a per-thread `sys.settrace` tracer so they hold on any thread (the
reference used SIGALRM, i.e. the main thread only):
* wall clock: checked on every traced call and line event;
* lines: "line" events of every traced frame (hook, helpers and the library code they call,
  except our guards and the `regex` package, which have their own bounds);
* call depth: deep recursion stops at MAX_CALL_DEPTH frames;
* memory: the AST guards of `guards.py` (per-object caps and a per-call allocation budget),
  plus a sampled check of the process's resident memory as a safety net.
All stop signals derive from BaseException, so hook-level `except Exception` cannot swallow
them. `ctx` is deep-copied into read-only containers; `nb` is the caller's dict and keeps
partial writes, but after each call it must hold plain data of bounded size (offending keys are
dropped). Any failure means "no effect" and is reported in a `HookOutcome`.
"""
from __future__ import annotations

import difflib
import sys
import time
from dataclasses import dataclass

from hr1_jax.patch import guards, sandbox
from hr1_jax.patch.guards import FrozenDict, HookMemoryError, HookTimeout, freeze

HOOK_NAMES = ("on_init", "make_pre_hint", "on_before_action", "on_post_step")
ALLOWED_EFFECT_KINDS = {
    "on_before_action": frozenset({"block_and_prompt", "force_action", "rewrite_action"}),
    "on_post_step": frozenset({"inject_hint", "force_action"}),
}
MAX_RETURN_TEXT_CHARS = 900
MAX_SKILLS = 5
MAX_CALL_DEPTH = 100
RSS_CHECK_EVERY_MASK = 31          # sample process memory every 32 traced lines
MAX_RSS_GROWTH = 256 * 2**20        # bytes a single hook call may add to the process
NB_SIZE_LIMIT = 1_000_000          # units: string chars; container slots count 4 (see inspect_nb)
MAX_ERROR_CHARS = 300

STATUSES = ("ok", "none", "error", "timeout", "memory", "invalid_return")

# Frames of our own guard code and of the `regex` package behind the hooks' `re` are not traced
# (guards are size-capped, regex compiles are bounded by the pattern cap and matching runs under
# its own timeout); the wall clock is still checked whenever they call further.
_UNTRACED_FILES = frozenset({guards.g_add.__code__.co_filename, sandbox.compile_hook.__code__.co_filename} | {
    m.__file__ for name, m in list(sys.modules.items())
    if (name == "regex" or name.startswith("regex.")) and (getattr(m, "__file__", None) or "").endswith(".py")})

# The only Python code a hook can reach besides our guards: its own code and SequenceMatcher.
# Any other frame that starts during a hook was started by the interpreter (a GC callback, a
# finalizer of some library object): it is left alone, a budget error raised there would be
# swallowed as "Exception ignored" instead of stopping the hook.
_HOOK_FILES = frozenset({sandbox.HOOK_FILENAME, difflib.__file__})


@dataclass
class HookOutcome:
    """One hook execution: `result` is the normalised effect (None = no effect)."""
    hook: str
    status: str
    result: dict | None
    error: str = ""
    elapsed_s: float = 0.0


def _error_text(e: BaseException) -> str:
    name = type(e).__name__
    if guards.repr_size(e.args, 4 * MAX_ERROR_CHARS) > 4 * MAX_ERROR_CHARS:
        return f"{name}: <message too large>"
    return f"{name}: {e}"[:MAX_ERROR_CHARS]


def _invoke(fn, fctx, nb, time_budget_s: float, line_budget: int):
    """Call fn(fctx, nb) under the budgets; returns (status, raw_result, error)."""
    perf = time.perf_counter
    deadline = perf() + max(0.001, float(time_budget_s))
    lines = 0
    depth = 0
    rss0 = guards.rss_bytes()

    def local(frame, event, arg):
        nonlocal lines, depth
        if event == "line":
            lines += 1
            if lines > line_budget:
                raise HookTimeout(f"line budget of {line_budget} exceeded")
            if perf() > deadline:
                raise HookTimeout(f"wall-clock budget of {time_budget_s}s exceeded")
            if not lines & RSS_CHECK_EVERY_MASK and rss0 is not None:
                # Safety net for copies no guard sees (slices, .copy() in loops, ...).
                grown = (guards.rss_bytes() or rss0) - rss0
                if grown > MAX_RSS_GROWTH:
                    raise HookMemoryError(f"process memory grew by {grown >> 20} MiB during the hook")
        elif event == "return":
            depth -= 1
        return local

    def on_call(frame, event, arg):
        nonlocal depth
        filename = frame.f_code.co_filename
        if filename not in _HOOK_FILES and filename not in _UNTRACED_FILES:
            return None
        if perf() > deadline:
            raise HookTimeout(f"wall-clock budget of {time_budget_s}s exceeded")
        if filename in _UNTRACED_FILES:
            return None
        depth += 1
        if depth > MAX_CALL_DEPTH:
            raise HookMemoryError(f"call depth above {MAX_CALL_DEPTH}")
        return local

    prev_budget = guards.set_budget(guards.CallBudget(deadline=deadline))
    old_trace = sys.gettrace()
    try:
        sys.settrace(on_call)
        try:
            raw = fn(fctx, nb)
        finally:
            sys.settrace(old_trace)
        return "ok", raw, ""
    except HookTimeout as e:
        return "timeout", None, str(e)
    except (HookMemoryError, MemoryError, RecursionError) as e:
        return "memory", None, _error_text(e)
    except Exception as e:
        return "error", None, _error_text(e)
    finally:
        guards.set_budget(prev_budget)


def _scrub_nb(nb: dict) -> str:
    """Drop nb entries that are not plain bounded data; returns the reason ('' if nb is fine)."""
    why = guards.inspect_nb(nb, NB_SIZE_LIMIT)
    if not why:
        return ""
    for key in list(nb):
        if guards.inspect_nb({"k": nb[key]}, NB_SIZE_LIMIT):
            del nb[key]
    if guards.inspect_nb(nb, NB_SIZE_LIMIT):
        nb.clear()
    return why


def call_hook(fn, ctx, nb: dict, hook_name: str, *, time_budget_s: float = 0.05,
              line_budget: int = 2000) -> HookOutcome:
    """Run one hook on a fresh read-only copy of ctx and report what happened."""
    start = time.perf_counter()
    if hook_name not in HOOK_NAMES:
        return HookOutcome(hook_name, "error", None, f"unknown hook name {hook_name!r}", 0.0)
    if not isinstance(nb, dict):
        return HookOutcome(hook_name, "error", None, "nb must be a dict", 0.0)
    frozen_ctx = freeze(ctx) if isinstance(ctx, dict) else FrozenDict()
    status, raw, error = _invoke(fn, frozen_ctx, nb, time_budget_s, line_budget)
    result = None
    if status == "ok":
        if raw is None:
            status = "none"
        else:
            result = normalize_hook_result(hook_name, raw, ctx if isinstance(ctx, dict) else {})
            if result is None:
                status = "invalid_return"
    nb_problem = _scrub_nb(nb)
    if nb_problem:
        result = None
        status = "memory" if "grew" in nb_problem else "error"
        error = f"{error}; {nb_problem}" if error else nb_problem
    return HookOutcome(hook_name, status, result, error, time.perf_counter() - start)


def run_hook(fn, ctx, nb: dict, hook_name: str, *, time_budget_s: float = 0.05,
             line_budget: int = 2000) -> dict | None:
    """Reference-compatible entry point: the normalised effect, or None on any failure."""
    return call_hook(fn, ctx, nb, hook_name, time_budget_s=time_budget_s, line_budget=line_budget).result


# --------------------------------------------------------------------------- §2.4 normalisation

def _clean_text(value) -> str:
    if not isinstance(value, str):
        return ""
    return " ".join(value.split())[:MAX_RETURN_TEXT_CHARS]


def _clean_action(value, ctx: dict) -> str:
    if not isinstance(value, str):
        return ""
    action = " ".join(value.lower().split())
    if not action:
        return ""
    if sandbox.ALFWORLD_INSTANCE_ACTION_RE.search(action):
        admissible = ctx.get("admissible") or []
        if action not in {" ".join(str(x).lower().split()) for x in admissible}:
            return ""
    return action[:MAX_RETURN_TEXT_CHARS]


def normalize_hook_result(hook_name: str, result, ctx: dict) -> dict | None:
    """Keep only the accepted return shape of each hook (reference spec §2.4); None = no effect."""
    if not isinstance(result, dict):
        return None
    if hook_name == "on_init":
        out: dict = {}
        skills = result.get("skills") or []
        if isinstance(skills, list):
            cleaned = []
            for item in skills[:MAX_SKILLS]:
                text = _clean_text(item.get("text", "") if isinstance(item, dict) else item)
                if text:
                    cleaned.append({"id": "code_hook_skill", "text": text, "trigger": "code_hook"})
            if cleaned:
                out["skills"] = cleaned
        tool_hint = _clean_text(result.get("tool_hint", ""))
        if tool_hint:
            out["tool_hint"] = tool_hint
        return out or None
    if hook_name == "make_pre_hint":
        message = _clean_text(result.get("message", ""))
        return {"message": message} if message else None
    kind = result.get("kind")
    kind = kind.strip() if isinstance(kind, str) else ""
    if kind not in ALLOWED_EFFECT_KINDS.get(hook_name, ()):
        return None
    out = {"kind": kind}
    message = _clean_text(result.get("message", ""))
    if message:
        out["message"] = message
    if kind in ("force_action", "rewrite_action"):
        action = _clean_action(result.get("action", ""), ctx)
        if not action:
            if hook_name == "on_post_step" and message:
                return {"kind": "inject_hint", "message": message}
            return None
        out["action"] = action
    if kind in ("block_and_prompt", "inject_hint") and not message:
        return None
    return out
