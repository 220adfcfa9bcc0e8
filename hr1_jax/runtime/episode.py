"""The episode loop: one task, one target agent, optionally one patch (reference spec §2.4, §4).

Benchmark-free: everything benchmark-specific (prompts, ctx fields, action strings, which tool calls
count, whether rewrite/force are honoured) comes from the `Environment`. The loop per turn:

  make_pre_hint -> user messages; agent call; (no tool call -> reprimand); for the first tool call
  (or every call when `env.process_all_tool_calls`): pending forced action replaces the call,
  on_before_action (block -> tool message with the text, no env step; rewrite/force -> replace the
  action when honoured), env.step -> tool message, on_post_step (inject_hint -> user message,
  force_action -> applied to the next turn's tool call).

Hook messages are appended after the turn's tool messages so the trajectory stays valid OpenAI
chat format (tool messages must directly follow their assistant message). A hook failure never
breaks the episode (it is recorded); an agent `AgentError` or an environment exception ends the
episode with status "infra_error" and reward None: an infrastructure failure is never a 0.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import time
import traceback
from typing import Any

from envs.base import HOOK_SITES, Action, Environment, Task
from hr1_jax.agents.base import AgentError

INFRA_ERROR = "infra_error"
MAX_TIPS = 5                      # reference: first 5 on_init skills become tips
# Runner statuses (hr1_jax.patch.runner): ok / none / error / timeout / memory / invalid_return.
HOOK_ERROR_STATUSES = ("error", "memory")
BLOCK_DEFAULT_MESSAGE = "The harness blocked this action. Choose a different action."


@dataclasses.dataclass
class HookEvent:
    hook: str
    turn: int
    status: str                   # the runner's outcome status (ok / none / error / timeout ...)
    effect: str | None            # skills / tool_hint / message / block_and_prompt / rewrite_action /
    #                               force_action / inject_hint / ignored_* / capped_* / unusable_*
    applied: bool = False
    error: str | None = None
    elapsed_s: float = 0.0
    detail: str | None = None     # e.g. the action before/after a rewrite

    def to_dict(self) -> dict:
        return dict(vars(self))   # flat immutable fields: what `asdict` gives, ~30x cheaper


@dataclasses.dataclass
class EpisodeResult:
    benchmark: str
    split: str
    task_id: int
    seed: int
    reward: float | None          # None only for infra_error
    success: bool
    status: str
    trajectory: list[dict]
    actions: list[str]
    hook_events: list[dict]
    counts: dict
    identity: dict
    agent: dict                   # name, usage totals, repaired tool calls, model calls
    final: dict                   # env.final_result() extras
    error: str | None = None
    wall_s: float = 0.0

    @property
    def infra_failed(self) -> bool:
        return self.status == INFRA_ERROR

    def to_dict(self, fields: tuple[str, ...] | None = None, *, copy_values: bool = True) -> dict:
        """Every field, or only `fields`, each as `asdict` would copy it; with `copy_values=False`
        the values themselves, for a caller that copies them its own way (a rollout worker
        pickles them: `asdict`'s copy costs ~10% of a patched dbbench episode's CPU)."""
        if fields is None and copy_values:
            return dataclasses.asdict(self)
        names = [f.name for f in dataclasses.fields(self)] if fields is None else fields
        if not copy_values:
            return {name: getattr(self, name) for name in names}
        return {name: copy.deepcopy(getattr(self, name)) for name in names}

    @classmethod
    def from_dict(cls, row: dict) -> "EpisodeResult":
        """The record of a `to_dict` row (a results.jsonl line or a worker's result): exactly its
        fields, so `from_dict(row).to_dict() == row` and the files round-trip byte for byte."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        missing = [n for n, f in fields.items() if n not in row and f.default is dataclasses.MISSING]
        unknown = sorted(set(row) - set(fields))
        if missing or unknown:
            raise ValueError(f"not an episode result row (task {row.get('task_id')!r}): "
                             f"missing {missing}, unknown {unknown}")
        return cls(**row)


def _cfg(config, section: str, key: str, default):
    try:
        return config[section][key]
    except (KeyError, TypeError, AttributeError):
        return default


def _compile(patch, benchmark: str, config):
    """Accept a compiled patch (anything with `.call`), a normalised patch dict, or None."""
    if patch is None or hasattr(patch, "call"):
        return patch
    from hr1_jax.patch.compiled import compile_patch_for_run
    try:
        section = config["patch_protocol"]
    except (KeyError, TypeError, AttributeError):
        section = None
    return compile_patch_for_run(patch, benchmark, section)


def _patch_sites(patch) -> frozenset:
    """Hook names a compiled patch defines (`.hooks` as names, (name, fn) pairs, objects with
    `.hook`, or a dict keyed by name); unknown layouts -> every site (call and let it answer)."""
    hooks = getattr(patch, "hooks", None)
    if patch is None:
        return frozenset()
    if hooks is None:
        return frozenset(HOOK_SITES)
    names = set()
    for h in hooks:
        if isinstance(h, str):
            names.add(h)
        elif isinstance(h, tuple) and h and isinstance(h[0], str):
            names.add(h[0])
        else:
            names.add(getattr(h, "hook", getattr(h, "name", None)))
    return frozenset(n for n in names if n in HOOK_SITES)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _parse_arguments(raw: Any) -> dict | None:
    if isinstance(raw, dict):
        return raw
    if raw in (None, ""):
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError, RecursionError):  # RecursionError: nested too deep to be arguments
        return None
    return value if isinstance(value, dict) else None


class _Episode:
    """State of one running episode (kept in one object so the loop reads top to bottom)."""

    def __init__(self, env: Environment, agent, task: Task, patch, config, seed: int):
        self.env, self.agent, self.task, self.seed = env, agent, task, seed
        self.patch = _compile(patch, task.benchmark, config)
        self.sites = _patch_sites(self.patch)
        self.max_forced = int(_cfg(config, "patch_protocol", "max_forced_actions_per_episode", 0))
        self.record = bool(_cfg(config, "runtime", "record_trajectory", True))
        self.nb: dict = {}
        self.messages: list[dict] = []
        self.actions: list[str] = []
        self.events: list[HookEvent] = []
        self.pending_force: str | None = None
        self.forced_count = 0
        self.counts = {"turns": 0, "env_steps": 0, "no_tool_call_turns": 0, "invalid_tool_calls": 0,
                       "dropped_tool_calls": 0, "blocked_actions": 0, "rewritten_actions": 0,
                       "forced_actions": 0, "hint_messages": 0, "hook_calls": 0, "hook_errors": 0,
                       "hook_timeouts": 0, "hook_invalid_returns": 0, "hook_kills": 0}
        self.agent_stats = {"name": getattr(agent, "name", type(agent).__name__), "model_calls": 0,
                            "repaired_tool_calls": 0,
                            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}

    # --- hooks --------------------------------------------------------------------------------
    def call_hooks(self, site: str, turn: int, **ctx_kwargs) -> list:
        """Run every hook of `site` (patch order); returns (outcome, event) for usable results."""
        if site not in self.sites:
            return []
        ctx = self.env.hook_context(site, turn=turn, **ctx_kwargs)
        usable = []
        for outcome in self.patch.call(site, ctx, self.nb):
            status = str(outcome.status)
            self.counts["hook_calls"] += 1
            if getattr(outcome, "killed", False):
                # The hook process had to be killed (runaway C call or dead process): the site
                # is not called again this episode, so one hostile hook costs one kill, not 50.
                self.counts["hook_kills"] += 1
                self.sites = self.sites - {site}
            if status == "timeout":
                self.counts["hook_timeouts"] += 1
            elif status in HOOK_ERROR_STATUSES:
                self.counts["hook_errors"] += 1
            elif status == "invalid_return":
                self.counts["hook_invalid_returns"] += 1
            event = HookEvent(hook=site, turn=turn, status=status, effect=None,
                              error=str(outcome.error)[:500] if outcome.error else None,
                              elapsed_s=round(float(outcome.elapsed_s or 0.0), 6))
            self.events.append(event)
            if isinstance(outcome.result, dict) and outcome.result:
                usable.append((outcome.result, event))
        return usable

    def forcing_allowed(self) -> bool:
        return self.max_forced <= 0 or self.forced_count < self.max_forced

    def hook_action(self, result: dict, event: HookEvent, current: Action | None, site: str) -> Action | None:
        """Resolve a rewrite/force action string into an Action, or record why it was not used."""
        kind = result.get("kind", "")
        if not self.env.honours_rewrite_and_force:
            event.effect = f"ignored_{kind}"
            return None
        if not self.forcing_allowed():
            event.effect = f"capped_{kind}"
            return None
        new = self.env.action_from_hook(_text(result.get("action")), current, site)
        if new is None:
            event.effect = f"unusable_{kind}"
            return None
        return new

    # --- episode ------------------------------------------------------------------------------
    def run(self) -> EpisodeResult:
        t0 = time.monotonic()
        error, status = None, None
        try:
            identity = self.start()
            self.loop()
            final = dict(self.env.final_result())
        except AgentError as e:
            error, final = f"agent: {e}", {}
        except Exception as e:  # an environment/runtime crash is infrastructure, not a task failure
            error, final = f"env: {type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}", {}
        if error is not None:
            status, reward, success = INFRA_ERROR, None, False
            identity = getattr(self, "identity", {})
        else:
            status = str(final.pop("status", "completed"))
            reward = float(final.pop("reward", 0.0))
            success = bool(final.pop("success", reward >= 1.0))
        return EpisodeResult(
            benchmark=self.task.benchmark, split=self.task.split, task_id=int(self.task.task_id),
            seed=self.seed, reward=reward, success=success, status=status,
            trajectory=self.messages if self.record else [], actions=self.actions,
            hook_events=[e.to_dict() for e in self.events], counts=self.counts, identity=identity,
            agent=self.agent_stats, final=final, error=error, wall_s=round(time.monotonic() - t0, 4))

    def start(self) -> dict:
        env = self.env
        first_user = env.reset(self.task)
        self.identity = env.task_manifest(self.task, self.seed)
        tips, hints = [], []
        for result, event in self.call_hooks("on_init", 0):
            skills = result.get("skills") or []
            new_tips = [t for t in (_text(s.get("text") if isinstance(s, dict) else s) for s in skills) if t]
            tips.extend(new_tips)
            hint = _text(result.get("tool_hint"))
            if hint:
                hints.append(hint)
            event.effect = "+".join(x for x, on in (("skills", new_tips), ("tool_hint", hint)) if on) or None
            event.applied = event.effect is not None
        tool_hint = "\n\n".join(hints)
        self.tools = env.apply_tool_hint(env.tool_specs(), tool_hint)
        self.messages = [{"role": "system", "content": env.system_prompt(tips[:MAX_TIPS], tool_hint)},
                         {"role": "user", "content": first_user}]
        return self.identity

    def loop(self) -> None:
        for turn in range(self.env.max_turns):
            self.counts["turns"] = turn + 1
            for result, event in self.call_hooks("make_pre_hint", turn):
                message = _text(result.get("message"))
                if message:
                    self.messages.append({"role": "user", "content": message})
                    self.counts["hint_messages"] += 1
                    event.effect, event.applied = "message", True
            if self.turn(turn):
                return

    def agent_call(self) -> dict:
        reply = self.agent.chat(self.messages, self.tools)
        self.agent_stats["model_calls"] += 1
        self.agent_stats["repaired_tool_calls"] += int(reply.get("repaired_tool_calls") or 0)
        for k, v in (reply.get("usage") or {}).items():
            if isinstance(v, (int, float)) and k in self.agent_stats["usage"]:
                self.agent_stats["usage"][k] += int(v)
        calls = [c for c in (reply.get("tool_calls") or []) if isinstance(c, dict)]
        if calls and not self.env.process_all_tool_calls:
            self.counts["dropped_tool_calls"] += len(calls) - 1
            calls = calls[:1]
        for i, call in enumerate(calls):
            call.setdefault("id", f"call_{len(self.messages)}_{i}")
            call.setdefault("type", "function")
        message = {"role": "assistant", "content": reply.get("content") or ""}
        if calls:
            message["tool_calls"] = calls
        self.messages.append(message)
        return message

    def turn(self, turn: int) -> bool:
        """One agent turn; returns True when the episode is over."""
        message = self.agent_call()
        calls = message.get("tool_calls", [])
        if not calls:
            self.counts["no_tool_call_turns"] += 1
            ended = self.env.on_no_tool_call()
            self.messages.append({"role": "user", "content": self.env.no_tool_call_message()})
            return bool(ended is not None and ended.done)
        later: list[str] = []  # hook messages, appended after this turn's tool messages
        done = False
        for call in calls:
            fn = call.get("function") or {}
            done = self.tool_call(turn, call["id"], str(fn.get("name", "")), fn.get("arguments"),
                                  message.get("content") or "", later)
            if done:
                break
        for text in later:
            self.messages.append({"role": "user", "content": text})
        return done

    def tool_call(self, turn: int, call_id: str, name: str, raw_args, raw_output: str,
                  later: list[str]) -> bool:
        env = self.env

        def tool_message(content: str) -> None:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": content})

        args = _parse_arguments(raw_args)
        action = env.action_from_tool_call(name, args) if args is not None else None
        if action is None:
            self.counts["invalid_tool_calls"] += 1
            tool_message(env.invalid_call_message(name, raw_args))
            return False
        if self.pending_force is not None:
            forced = env.action_from_hook(self.pending_force, action, "on_post_step")
            self.pending_force = None
            if forced is not None:
                self.events.append(HookEvent(hook="on_post_step", turn=turn, status="applied",
                                             effect="force_action", applied=True,
                                             detail=f"{action.text} -> {forced.text}"))
                self.counts["forced_actions"] += 1
                self.forced_count += 1
                action = forced
        for result, event in self.call_hooks("on_before_action", turn, action=action, raw_output=raw_output):
            kind = result.get("kind", "")
            message = _text(result.get("message"))
            if kind == "block_and_prompt":
                event.effect, event.applied = kind, True
                self.counts["blocked_actions"] += 1
                self.actions.append(f"[blocked] {action.text}")
                tool_message(message or BLOCK_DEFAULT_MESSAGE)
                return False
            if kind in ("rewrite_action", "force_action"):
                event.effect = kind
                new = self.hook_action(result, event, action, "on_before_action")
                if new is not None:
                    event.applied, event.detail = True, f"{action.text} -> {new.text}"
                    self.counts["rewritten_actions" if kind == "rewrite_action" else "forced_actions"] += 1
                    self.forced_count += 1
                    action = new
                    if message:
                        later.append(message)
        step = env.step(action)
        self.counts["env_steps"] += 1
        self.actions.append(action.text)
        tool_message(step.observation)
        if step.done:
            return True
        for result, event in self.call_hooks("on_post_step", turn, action=action):
            kind = result.get("kind", "")
            message = _text(result.get("message"))
            event.effect = kind
            if kind == "force_action":
                if self.hook_action(result, event, None, "on_post_step") is not None:
                    # Resolved again against the agent's next call (WebShop wraps by current tool).
                    self.pending_force = _text(result.get("action"))
                    event.applied, event.detail = True, f"pending: {self.pending_force}"
                if message:
                    later.append(message)
                    self.counts["hint_messages"] += 1
            elif kind == "inject_hint" and message:
                event.applied = True
                later.append(message)
                self.counts["hint_messages"] += 1
        return False


def run_episode(env: Environment, agent, task: Task, patch=None, *, config=None, seed: int = 0) -> EpisodeResult:
    """Run one episode of `task` on `env` with `agent` (a TargetAgent) and an optional patch
    (a compiled patch, or a normalised patch dict compiled here with the config's budgets)."""
    return _Episode(env, agent, task, patch, config, seed).run()
