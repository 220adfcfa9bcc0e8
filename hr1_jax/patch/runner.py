"""Running one compiled hook under budgets (reference spec §3.2) and normalising its return (§2.4).

This is the first wall (the sandbox's own checks); `hook_process.py` adds the second, a separate
process with an address-space limit and a watchdog. Budgets that decide a hook's fate count
work, so the same hook on the same ctx gets the same status on an idle and on a loaded machine:
* lines: statements executed by hook code, counted by ticks that the sandbox's rewrite puts into
  the hook's own code (no tracer a hook could switch off; the reference counted line events);
* work: large allocations and C-level scans charged by the guards of `guards.py` (per-object caps
  and a per-call budget);
* wall clock only as a far safety net (`time_budget_s`, sampled every 64 counted statements and
  at return), process memory as a sampled safety net, a call-depth cap in the functions that can
  recurse.
All stop signals derive from BaseException, so hook-level `except Exception` cannot swallow
them, and an exceeded budget raises again at every later statement. `ctx` is deep-copied into
read-only containers; `nb` is the caller's dict and keeps partial writes, but after each call it
must hold plain data of bounded size (offending keys are dropped). Any failure means "no
effect" and is reported in a `HookOutcome`.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass

from hr1_jax.patch import guards, specs
from hr1_jax.patch.guards import FrozenDict, HookMemoryError, HookTimeout, freeze
from hr1_jax.utils.jsonsafe import safe_str

HOOK_NAMES = ("on_init", "make_pre_hint", "on_before_action", "on_post_step")
ALLOWED_EFFECT_KINDS = {
    "on_before_action": frozenset({"block_and_prompt", "force_action", "rewrite_action"}),
    "on_post_step": frozenset({"inject_hint", "force_action"}),
}
MAX_RETURN_TEXT_CHARS = 900
MAX_SKILLS = 5
NB_SIZE_LIMIT = 1_000_000          # units: string chars; container slots count 4 (see inspect_nb)
MAX_ERROR_CHARS = 300
DEFAULT_TIME_BUDGET_S = 2.0        # wall-clock safety net per call; the line budget decides
DEFAULT_LINE_BUDGET = 2000

STATUSES = ("ok", "none", "error", "timeout", "memory", "invalid_return")


@dataclass
class HookOutcome:
    """One hook execution: `result` is the normalised effect (None = no effect). `killed`: the
    hook process had to be killed (a runaway C call or a dead process), so the hook is not
    called again in this episode."""
    hook: str
    status: str
    result: dict | None
    error: str = ""
    elapsed_s: float = 0.0
    killed: bool = False


def _error_text(e: BaseException) -> str:
    name = type(e).__name__
    if guards.repr_size(e.args, 4 * MAX_ERROR_CHARS) > 4 * MAX_ERROR_CHARS:
        return f"{name}: <message too large>"
    try:
        return f"{name}: {e}"[:MAX_ERROR_CHARS]
    except Exception:  # a str() that fails (or is hook-controlled) must not escape
        return f"{name}: <unprintable>"


def _invoke(fn, fctx, nb, time_budget_s: float, line_budget: int):
    """Call fn(fctx, nb) under the budgets; returns (status, raw_result, error)."""
    budget = guards.CallBudget(deadline=time.perf_counter() + max(0.001, float(time_budget_s)),
                               line_budget=int(line_budget))
    prev_budget = guards.set_budget(budget)
    try:
        raw = fn(fctx, nb)
        if budget.lines_left < 0:  # exceeded, raised, and swallowed somewhere in C
            return "timeout", None, f"line budget of {line_budget} exceeded"
        if time.perf_counter() > budget.deadline:  # the last stretch ran in C, past the net
            return "timeout", None, "wall-clock safety net exceeded"
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
    if not nb:
        return ""  # an empty dict is plain data, far below the limit (most calls write nothing)
    why = guards.inspect_nb(nb, NB_SIZE_LIMIT)
    if not why:
        return ""
    for key in list(nb):
        if guards.inspect_nb({"k": nb[key]}, NB_SIZE_LIMIT):
            del nb[key]
    if guards.inspect_nb(nb, NB_SIZE_LIMIT):
        nb.clear()
    return why


def call_hook(fn, ctx, nb: dict, hook_name: str, *, time_budget_s: float = DEFAULT_TIME_BUDGET_S,
              line_budget: int = DEFAULT_LINE_BUDGET) -> HookOutcome:
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
        status = "error" if "non-data" in nb_problem else "memory"
        error = f"{error}; {nb_problem}" if error else nb_problem
    return HookOutcome(hook_name, status, result, safe_str(error), time.perf_counter() - start)


def run_hook(fn, ctx, nb: dict, hook_name: str, *, time_budget_s: float = DEFAULT_TIME_BUDGET_S,
             line_budget: int = DEFAULT_LINE_BUDGET) -> dict | None:
    """Reference-compatible entry point: the normalised effect, or None on any failure."""
    return call_hook(fn, ctx, nb, hook_name, time_budget_s=time_budget_s, line_budget=line_budget).result


# --------------------------------------------------------------------------- §2.4 normalisation

# A returned string is cut before any splitting or matching: host code that handles a hook's
# return runs outside every budget (a 1M-char action once kept an ALFWorld regex busy ~40 min).
_RAW_TEXT_CAP = 4 * MAX_RETURN_TEXT_CHARS
_DIGIT = re.compile(r"\d")


def _clean_text(value) -> str:
    if not isinstance(value, str):
        return ""
    value = value[:_RAW_TEXT_CAP]
    if type(value) is str and value.isprintable() and "  " not in value and value[:1] != " " and value[-1:] != " ":
        # Most hook texts: no whitespace but single inner spaces (every other whitespace character
        # is unprintable) and no lone surrogate (unprintable too): split/join and safe_str would
        # return the text as it is.
        return value[:MAX_RETURN_TEXT_CHARS]
    return safe_str(" ".join(value.split())[:MAX_RETURN_TEXT_CHARS])


def _clean_action(value, ctx: dict) -> str:
    if not isinstance(value, str):
        return ""
    action = safe_str(" ".join(value[:_RAW_TEXT_CAP].lower().split())[:MAX_RETURN_TEXT_CHARS])
    if not action:
        return ""
    # A numbered instance (PatchSpec.instance_action_re of any registered benchmark) must be
    # admissible; only an action with a digit can name one (and the registry costs a lookup).
    if _DIGIT.search(action) and any(p.search(action) for p in specs.instance_patterns()):
        admissible = ctx.get("admissible") or []
        if action not in {" ".join(str(x).lower().split()) for x in admissible}:
            return ""
    return action


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
