"""Patch schema `harness-r1-patch-v1` and its normalisation (reference spec §2.1-§2.2).

`normalize_patch` reproduces the reference validator (limits, leakage regexes, legacy DSL
action types, sandbox compilation of every code hook) and, by default, the two protocol checks
the reference applies on the RL/eval path: code-hook-only and runtime-no-op rejection. Two checks
the reference only asked for in prompts are available behind flags (off = reference behaviour):
each hook at most once, and a total code budget.

What differs per benchmark (legacy DSL vocabulary, recovery triggers and effects, task-id leak
patterns, the numbered-instance rule) is its `envs.plugin.PatchSpec`, asked of the registry.
"""
from __future__ import annotations

import copy
import re

from hr1_jax.patch import specs
from hr1_jax.patch.errors import PatchError
from hr1_jax.patch.runner import HOOK_NAMES
from hr1_jax.patch.sandbox import MAX_HOOK_SOURCE_CHARS, compile_hook

SCHEMA_VERSION = "harness-r1-patch-v1"
MAX_ACTIONS = 12
TEXT_MAX_CHARS = 900
LEGACY_ACTION_TYPES = ("set_config", "edit_tool_hint", "add_or_edit_skill", "add_guard_rule", "add_recovery_rule")
ACTION_TYPES = LEGACY_ACTION_TYPES + ("add_code_hook",)

# Task-identifying text in any patch; each registered benchmark adds its own id patterns.
LEAKAGE_PATTERNS = (re.compile(r"\b(?:task|index|sample)\s*#?\s*\d{1,5}\b", re.IGNORECASE),)

# Legacy DSL vocabulary (kept so old patches normalise; inert under code-hook-only); the
# benchmark-specific part (tools, config fields, paths, predicates) is its PatchSpec.
MODULE_SWITCHES = ("enabled", "h2", "h3", "h4", "h5", "h2_enabled", "h3_enabled", "h4_enabled", "h5_enabled")
CONDITION_OPS = ("all", "any", "not", "eq", "ne", "gt", "gte", "lt", "lte", "contains", "startswith", "endswith", "pred")
EFFECT_KINDS = ("block_and_prompt", "inject_hint", "force_action", "rewrite_action")
_ID_RE = re.compile(r"[a-zA-Z0-9_.:-]{1,80}")
_TOKEN_RE = re.compile(r"[a-z0-9_.:-]{1,64}")


def clean_text(value, field: str, required: bool = True) -> str:
    """Whitespace-collapsed text, at most 900 chars, free of task-identifying leakage."""
    if not isinstance(value, str):
        raise PatchError("bad_text", f"{field} must be a string")
    text = " ".join(value.split())
    if required and not text:
        raise PatchError("empty_text", f"{field} cannot be empty")
    if len(text) > TEXT_MAX_CHARS:
        raise PatchError("text_too_long", f"{field} exceeds {TEXT_MAX_CHARS} chars")
    if any(p.search(text) for p in LEAKAGE_PATTERNS) or any(p.search(text) for p in specs.id_leak_patterns()):
        raise PatchError("leakage", f"{field} appears to contain task-specific leakage")
    return text


def _token(value, field: str, keyword: bool = False) -> str:
    if not isinstance(value, str):
        raise PatchError("bad_text", f"{field} must be a string")
    token = re.sub(r"\s+", "_", value.strip().lower()) if keyword else value.strip().lower()
    if token != "*" and not _TOKEN_RE.fullmatch(token):
        raise PatchError("bad_token", f"invalid {field}: {value!r}")
    return token


def _rule_id(action: dict, key: str) -> str:
    rid = str(action.get(key) or action.get("id") or "").strip()
    if not _ID_RE.fullmatch(rid):
        raise PatchError("bad_id", f"invalid {key}: {rid!r}")
    return rid


def _condition(bench: str, cond, depth: int):
    if depth > 8:
        raise PatchError("bad_condition", "condition nesting is too deep")
    if not isinstance(cond, dict) or len(cond) != 1:
        raise PatchError("bad_condition", "condition must be an object with exactly one operator")
    op, value = next(iter(cond.items()))
    if op not in CONDITION_OPS:
        raise PatchError("bad_condition", f"unsupported condition operator: {op!r}")
    if op in ("all", "any"):
        if not isinstance(value, list) or not value:
            raise PatchError("bad_condition", f"condition.{op} must be a non-empty list")
        return {op: [_condition(bench, c, depth + 1) for c in value]}
    if op == "not":
        return {op: _condition(bench, value, depth + 1)}
    if op == "pred":
        if value not in specs.spec(bench).predicates:
            raise PatchError("bad_condition", f"unsupported predicate for {bench}: {value!r}")
        return {op: value}
    if not isinstance(value, list) or len(value) != 2:
        raise PatchError("bad_condition", f"condition.{op} must be a two-item list")
    out = []
    spec = specs.spec(bench)
    for operand in value:
        if isinstance(operand, str):
            operand = dict(spec.path_aliases).get(operand, operand)
            if operand.startswith(("action.", "state.", "task.")) and operand not in spec.condition_paths:
                raise PatchError("bad_condition", f"unsupported condition path for {bench}: {operand!r}")
        out.append(operand)
    return {op: out}


def _effect(bench: str, effect, rule_kind: str) -> dict:
    if not isinstance(effect, dict):
        raise PatchError("bad_effect", "rule.effect must be an object")
    kind = str(effect.get("kind") or "").strip()
    if kind not in EFFECT_KINDS:
        raise PatchError("bad_effect", f"unsupported effect kind: {kind!r}")
    spec = specs.spec(bench)
    allowed = ("block_and_prompt", "force_action", "rewrite_action") if rule_kind == "guard" else spec.recovery_effects
    if kind not in allowed:
        raise PatchError("bad_effect", f"effect kind {kind!r} is not supported for {bench} {rule_kind} rules")
    out = {"kind": kind}
    if kind in ("block_and_prompt", "inject_hint"):
        out["message"] = clean_text(effect.get("message", ""), "effect.message")
    else:
        out["action"] = clean_text(effect.get("action", ""), "effect.action")
        if spec.instance_action_re is not None and spec.instance_action_re.search(out["action"].lower()):
            raise PatchError(f"{bench}_instance_leak",
                             f"{specs.descriptor(bench).report.title} force/rewrite actions may not name numbered instances")
        if effect.get("message"):
            out["message"] = clean_text(effect.get("message", ""), "effect.message", required=False)
    return out


def _legacy_action(bench: str, typ: str, action: dict) -> dict:
    spec = specs.spec(bench)
    if typ == "set_config":
        target = str(action.get("target") or action.get("field") or "").strip()
        field = target.split(".", 1)[1] if "." in target else target
        if field in MODULE_SWITCHES:
            raise PatchError("bad_config", f"{field!r} cannot be changed by a patch (built-in module switch)")
        fields = {name: (lo, hi) for name, lo, hi in spec.config_fields}
        if field not in fields:
            raise PatchError("bad_config", f"{field!r} is not an exposed config target for {bench}")
        lo, hi = fields[field]
        value = action.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            raise PatchError("bad_config", f"{field} expects a number in [{lo}, {hi}]")
        return {"type": typ, "target": field, "value": float(value)}
    if typ == "edit_tool_hint":
        tool = str(action.get("tool") or "").strip()
        if tool not in spec.tools:
            raise PatchError("bad_tool", f"unsupported tool for {bench}: {tool!r}")
        operation = str(action.get("operation") or "append").strip()
        if operation not in ("append", "prepend", "replace"):
            raise PatchError("bad_tool", f"unsupported edit_tool_hint operation: {operation!r}")
        return {"type": typ, "tool": tool, "operation": operation,
                "text": clean_text(action.get("text", ""), "edit_tool_hint.text")}
    if typ == "add_or_edit_skill":
        task_types = action.get("task_types") or ["*"]
        keywords = action.get("keywords") or []
        if not isinstance(task_types, list) or len(task_types) > 16:
            raise PatchError("bad_skill", "skill.task_types must be a list of <=16 strings")
        if not isinstance(keywords, list) or len(keywords) > 32:
            raise PatchError("bad_skill", "skill.keywords must be a list of <=32 strings")
        return {"type": typ, "skill_id": _rule_id(action, "skill_id"),
                "task_types": [_token(t, "task_type") for t in task_types],
                "keywords": [_token(k, "keyword", keyword=True) for k in keywords],
                "text": clean_text(action.get("text", ""), "skill.text")}
    kind = "guard" if typ == "add_guard_rule" else "recovery"
    trigger = str(action.get("trigger") or ("before_action" if kind == "guard" else "post_step")).strip()
    triggers = ("before_action",) if kind == "guard" else spec.recovery_triggers
    if trigger not in triggers:
        raise PatchError("bad_rule", f"unsupported {kind} trigger: {trigger!r}")
    return {"type": typ, "rule_id": _rule_id(action, "rule_id"), "trigger": trigger,
            "condition": _condition(bench, action.get("condition"), 0),
            "effect": _effect(bench, action.get("effect") or {}, kind)}


def _code_hook(bench: str, action: dict) -> dict:
    hook = str(action.get("hook") or "").strip()
    if hook not in HOOK_NAMES:
        raise PatchError("bad_hook_name", f"unsupported code hook: {hook!r}")
    code = action.get("code")
    if not isinstance(code, str) or not code.strip():
        raise PatchError("empty_code", "code hook must include non-empty code")
    if len(code) > MAX_HOOK_SOURCE_CHARS:
        raise PatchError("code_too_long", f"code hook exceeds {MAX_HOOK_SOURCE_CHARS} chars")
    compile_hook(code, bench)  # raises HookCompileError (a PatchError)
    return {"type": "add_code_hook", "hook": hook, "code": code}


def _is_runtime_effective(bench: str, action: dict) -> bool:
    typ = action["type"]
    if typ == "add_code_hook":
        return action["hook"] in HOOK_NAMES
    if not specs.spec(bench).legacy_effective:
        return False
    if typ == "add_guard_rule":
        return action["trigger"] == "before_action" and action["effect"]["kind"] in (
            "block_and_prompt", "force_action", "rewrite_action")
    if typ == "add_recovery_rule":
        return action["effect"]["kind"] in ("inject_hint", "force_action")
    return True  # skills / tool hints / config change the target's prompts


def normalize_patch(obj, benchmark: str | None = None, *, require_code_hook_only: bool = True,
                    reject_runtime_noop: bool = True, enforce_hook_once: bool = False,
                    max_total_code_chars: int = 0) -> dict:
    """Validate and normalise a raw patch dict; raises PatchError. As in the reference, the
    patch's own `benchmark` wins over the argument."""
    if not isinstance(obj, dict):
        raise PatchError("not_object", "patch must be a JSON object")
    patch = copy.deepcopy(obj)
    bench = str(patch.get("benchmark") or benchmark or "").lower()
    specs.descriptor(bench)  # raises bad_benchmark unless registered
    actions = patch.get("actions")
    if not isinstance(actions, list) or not actions:
        raise PatchError("no_actions", "patch.actions must be a non-empty list")
    if len(actions) > MAX_ACTIONS:
        raise PatchError("too_many_actions", f"patch.actions has more than {MAX_ACTIONS} actions")
    out = {"schema_version": SCHEMA_VERSION, "benchmark": bench,
           "description": clean_text(str(patch.get("description", "")), "description", required=False),
           "actions": []}
    for idx, action in enumerate(actions):
        if not isinstance(action, dict):
            raise PatchError("bad_action", f"action {idx} must be an object")
        typ = action.get("type")
        if typ not in ACTION_TYPES:
            raise PatchError("bad_action_type", f"action {idx} has unsupported type: {typ!r}")
        try:
            out["actions"].append(_code_hook(bench, action) if typ == "add_code_hook"
                                  else _legacy_action(bench, typ, action))
        except PatchError as e:
            e.message = f"action {idx} ({action.get('hook') or typ}): {e.message}"
            e.args = (e.message,)
            raise
    if require_code_hook_only:
        require_code_hook_only_patch(out)
    if reject_runtime_noop and not any(_is_runtime_effective(bench, a) for a in out["actions"]):
        raise PatchError("runtime_noop", "patch has no action with a runtime effect")
    hooks = [a["hook"] for a in out["actions"] if a["type"] == "add_code_hook"]
    if enforce_hook_once:
        dup = sorted({h for h in hooks if hooks.count(h) > 1})
        if dup:
            raise PatchError("duplicate_hook", f"hooks used more than once: {', '.join(dup)}")
    if max_total_code_chars:
        total = sum(len(a["code"]) for a in out["actions"] if a["type"] == "add_code_hook")
        if total > max_total_code_chars:
            raise PatchError("code_budget", f"total hook code is {total} chars (limit {max_total_code_chars})")
    return out


def require_code_hook_only_patch(patch: dict) -> None:
    """Reference check on an already-normalised patch: every action is add_code_hook."""
    if not isinstance(patch, dict):
        raise PatchError("not_object", "patch must be a JSON object")
    actions = patch.get("actions")
    if not isinstance(actions, list) or not actions:
        raise PatchError("no_actions", "patch.actions must be a non-empty list")
    for idx, action in enumerate(actions):
        if not isinstance(action, dict) or action.get("type") != "add_code_hook":
            typ = action.get("type") if isinstance(action, dict) else None
            raise PatchError("not_code_hook_only",
                             f"action {idx} type {typ!r} is not allowed in code-hook-only protocol")


def normalize_options(section) -> dict:
    """normalize_patch keyword arguments from the `patch_protocol` config section."""
    return {"require_code_hook_only": bool(section.require_code_hook_only),
            "reject_runtime_noop": bool(section.reject_runtime_noop),
            "enforce_hook_once": bool(section.enforce_hook_once),
            "max_total_code_chars": int(section.max_total_code_chars)}
