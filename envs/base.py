"""The benchmark interface the runtime is written against (the runtime names no benchmark).

An environment owns one episode at a time: `reset(task)` starts it, `step(action)` advances it,
and `hook_context(site, ...)` builds the read-only evidence (`ctx`) that patch hooks see at each
lifecycle call site, with the field names of the reference (spec §4) so reference patches run
unchanged. Per-benchmark runtime rules (which tool calls are processed, how hook-returned action
strings become actions, whether rewrite/force are honoured) are declared here so the episode loop
in `hr1_jax/runtime` stays benchmark-free.
"""
from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
from typing import Any, ClassVar

HOOK_SITES = ("on_init", "make_pre_hint", "on_before_action", "on_post_step")
TASK_MANIFEST_PROTOCOL = "hr1_task_manifest_v1"


_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})


def canonical(value: Any) -> Any:
    """Canonical form for hashing (reference spec §5.2): dicts -> [key, value] pairs sorted by key,
    lists/tuples -> lists, sets -> sorted by their canonical JSON, scalars kept, others -> str()."""
    # Exact scalar types and all-str-key dicts first: identities and cache keys hash on the
    # parent's CPU beside the rollout workers. Same result as the general branches below (an
    # exact str key is its own str(); distinct keys never tie, so plain key order is the order).
    if type(value) in _PLAIN_SCALARS:
        return value
    if type(value) is dict and all(type(k) is str for k in value):
        return [[k, canonical(value[k])] for k in sorted(value)]
    if isinstance(value, dict):
        return [[str(k), canonical(v)] for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))]
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((canonical(v) for v in value), key=lambda v: json.dumps(v, separators=(",", ":"),
                                                                             ensure_ascii=False))
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def canonical_sha256(value: Any) -> str:
    """SHA-256 of the compact, non-ASCII-escaped JSON of `canonical(value)`."""
    text = json.dumps(canonical(value), separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclasses.dataclass(frozen=True)
class Task:
    """One task with a stable identity.

    `task_id` is the index within `split`; `payload` is the JSON-able content that defines the task
    (instruction/goal/question, game file digest, seed...) and is what identity manifests hash.
    `oracle` is privileged knowledge (gold answer, walkthrough, target product) that only scripted
    agents and the environment's own judge may read; it is never put into a hook ctx.
    """
    benchmark: str
    split: str
    task_id: int
    payload: dict
    oracle: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)


@dataclasses.dataclass
class Action:
    """An action about to be executed: the tool call (name + arguments) and its text form
    (`search[red shoes]`, `go to desk 1`, the SQL query...)."""
    tool: str
    arguments: dict
    text: str


@dataclasses.dataclass
class StepResult:
    observation: str          # content of the tool message returned to the agent
    reward: float             # the episode reward so far (final when done)
    done: bool
    info: dict = dataclasses.field(default_factory=dict)


class Environment(abc.ABC):
    benchmark: ClassVar[str]
    env_version: ClassVar[str]             # bump when mechanics change: it is part of task identity
    # Runtime rules (reference spec §2.4/§4):
    process_all_tool_calls: ClassVar[bool] = False   # DBBench: every call in a turn; others: first only
    honours_rewrite_and_force: ClassVar[bool] = True  # DBBench v1 ignores rewrite/force (logged)
    max_turns: int

    @classmethod
    def pin_run_section(cls, section: dict) -> dict:
        """The config section with choices that must hold for a whole run made concrete (e.g.
        DBBench's `backend=auto`). Called once in the parent before workers start, so every
        worker, also a replacement, runs on the same choice. Default: unchanged."""
        return section

    # --- tasks -------------------------------------------------------------------------------
    @abc.abstractmethod
    def tasks(self, split: str) -> list[Task]:
        """All tasks of a named split, in a stable order (task_id = position)."""

    # --- episode -----------------------------------------------------------------------------
    @abc.abstractmethod
    def tool_specs(self) -> list[dict]:
        """OpenAI function-tool specs for this benchmark (fresh copy each call)."""

    @abc.abstractmethod
    def system_prompt(self, tips: list[str], tool_hint: str) -> str:
        """The target's system prompt, with `on_init` skills as tips and, where the benchmark puts
        it there (DBBench), the tool hint."""

    def apply_tool_hint(self, tools: list[dict], tool_hint: str) -> list[dict]:
        """Episode-local tool list with the `on_init` tool hint applied (default: appended to every
        tool description). Must not mutate `tools`."""
        import copy
        out = copy.deepcopy(tools)
        if tool_hint:
            for tool in out:
                fn = tool["function"]
                fn["description"] = (fn.get("description", "") + "\n\n" + tool_hint).strip()
        return out

    @abc.abstractmethod
    def reset(self, task: Task) -> str:
        """Start an episode; returns the first user message content."""

    @abc.abstractmethod
    def action_from_tool_call(self, name: str, arguments: dict) -> Action | None:
        """The agent's tool call as an Action, or None when the tool is unknown / arguments bad
        (the runtime then answers with `invalid_call_message`)."""

    @abc.abstractmethod
    def action_from_hook(self, action: str, current: Action | None, site: str) -> Action | None:
        """A hook-returned action string (rewrite/force) as an Action, or None if unusable."""

    def invalid_call_message(self, name: str, arguments: Any) -> str:
        return f"Invalid tool call {name!r}. Use one of the provided tools with valid arguments."

    def no_tool_call_message(self) -> str:
        return "You must call one of the provided tools in every turn."

    @abc.abstractmethod
    def step(self, action: Action) -> StepResult:
        """Execute an action (the env keeps its own trackers for ctx up to date)."""

    @abc.abstractmethod
    def hook_context(self, site: str, *, turn: int, action: Action | None = None,
                     raw_output: str = "") -> dict:
        """The ctx dict for a hook call site (spec §4 field names). `turn` is 0-based."""

    def on_no_tool_call(self) -> StepResult | None:
        """Called when the agent produced no tool call; may end the episode (returns a result) or
        return None to continue. Default: continue."""
        return None

    @abc.abstractmethod
    def final_result(self) -> dict:
        """At episode end: {"reward": float, "success": bool, "status": str, ...extras}."""

    def manifest_extras(self, task: Task) -> dict:
        """Extra JSON-able identity fields known only after `reset` (e.g. a digest of generated
        prices or of the game file); default none. Part of the task manifest."""
        return {}

    def task_manifest(self, task: Task, seed: int) -> dict:
        """The task's identity manifest (reference spec §5.2, generalised to every benchmark):
        hashes of what defines the task plus env version and seed, and `sha256` over all of it.
        Baseline and rerun must produce equal manifests. Called by the runtime after `reset`."""
        body = {"protocol": TASK_MANIFEST_PROTOCOL, "benchmark": task.benchmark, "split": task.split,
                "task_id": int(task.task_id), "env_version": str(self.env_version), "seed": int(seed),
                "payload_sha256": canonical_sha256(task.payload)}
        body.update({k: v for k, v in self.manifest_extras(task).items() if k not in body})
        return {**body, "sha256": canonical_sha256(body)}

    def close(self) -> None:
        """Release resources (DB connections, game processes)."""
