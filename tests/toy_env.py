"""A tiny real Environment (a counter game) and agent, for runtime and rollout-service tests.

Task: reach `target` with `add(amount)` steps, then `submit()`. Reward 1.0 iff the count equals the
target at submit; running out of turns gives 0 with status "task_limit_reached". Importable from
subprocess workers (tests/ is on sys.path) as "toy_env:CounterEnv" / "toy_env:make_agent".
"""
from __future__ import annotations

import json
import os
import re
import signal
import time

from envs.base import Action, Environment, StepResult, Task


class CounterEnv(Environment):
    benchmark = "counter"
    env_version = "counter-v1"

    def __init__(self, config=None, *, max_turns: int = 8):
        self.max_turns = max_turns
        self.task: Task | None = None
        self.count = 0
        self.reward = 0.0
        self.done = False
        self.history: list[str] = []

    def tasks(self, split: str) -> list[Task]:
        return [Task("counter", split, i, {"target": 1 + i % 4}, oracle={"target": 1 + i % 4})
                for i in range(40)]

    def tool_specs(self) -> list[dict]:
        def spec(name, props):
            return {"type": "function", "function": {"name": name, "description": f"{name} tool",
                                                     "parameters": {"type": "object", "properties": props}}}
        return [spec("add", {"amount": {"type": "integer"}}), spec("submit", {})]

    def system_prompt(self, tips: list[str], tool_hint: str) -> str:
        text = "Reach the target count, then submit."
        if tips:
            text += "\n\nSome tips that may help for this task:\n" + "\n".join(f"- {t}" for t in tips)
        return text

    def reset(self, task: Task) -> str:
        self.task, self.count, self.reward, self.done, self.history = task, 0, 0.0, False, []
        return f"Target: {task.payload['target']}. count=0"

    def action_from_tool_call(self, name, arguments):
        if name == "add" and isinstance(arguments.get("amount", 1), int):
            amount = arguments.get("amount", 1)
            return Action("add", {"amount": amount}, f"add[{amount}]")
        if name == "submit":
            return Action("submit", {}, "submit")
        return None

    def action_from_hook(self, action, current, site):
        m = re.fullmatch(r"add\[(-?\d+)\]", action.strip().lower())
        if m:
            return Action("add", {"amount": int(m.group(1))}, f"add[{m.group(1)}]")
        return Action("submit", {}, "submit") if action.strip().lower() == "submit" else None

    def step(self, action: Action) -> StepResult:
        self.history.append(action.text)
        if action.tool == "add":
            self.count += action.arguments["amount"]
            return StepResult(f"count={self.count}", 0.0, False)
        self.done = True
        self.reward = 1.0 if self.count == self.task.payload["target"] else 0.0
        return StepResult(f"submitted count={self.count}", self.reward, True)

    def hook_context(self, site, *, turn, action=None, raw_output=""):
        return {"observation": f"count={self.count}", "step": turn, "max_step": self.max_turns,
                "action": {"tool": action.tool if action else "", "final_action": action.text if action else ""},
                "state": {"count": self.count, "history": list(self.history)},
                "task": {"target": self.task.payload["target"]}}

    def final_result(self) -> dict:
        status = "completed" if self.done else "task_limit_reached"
        return {"reward": self.reward, "success": self.reward >= 1.0, "status": status, "count": self.count}


class DBStyleCounterEnv(CounterEnv):
    """DBBench-like runtime rules: every tool call of a turn, rewrite/force ignored."""
    process_all_tool_calls = True
    honours_rewrite_and_force = False


def _call(name: str, args: dict, i: int = 0) -> dict:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


class CounterAgent:
    """Adds `step` until the last observed count reaches the target, then submits.

    `overshoot=True` makes it add one more time before submitting (a failure mode a hint fixes:
    it follows any user message containing "submit now"). `mode` env var hooks for worker tests:
    HR1_TOY_AGENT_SLEEP (seconds per call), HR1_TOY_AGENT_CRASH_FILE (if the file exists, the
    process SIGKILLs itself once and removes the file).
    """
    name = "counter-agent"

    def __init__(self, task: Task, seed: int = 0, *, overshoot: bool = False, multi: bool = False,
                 silent_turns: int = 0):
        self.target = task.oracle["target"]
        self.overshoot, self.multi, self.silent_turns = overshoot, multi, silent_turns
        self.calls = 0

    def chat(self, messages, tools):
        self.calls += 1
        delay = float(os.environ.get("HR1_TOY_AGENT_SLEEP", "0") or 0)
        if delay:
            time.sleep(delay)
        crash = os.environ.get("HR1_TOY_AGENT_CRASH_FILE", "")
        if crash and os.path.exists(crash):
            os.remove(crash)
            os.kill(os.getpid(), signal.SIGKILL)
        usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
        if self.calls <= self.silent_turns:
            return {"role": "assistant", "content": "thinking...", "usage": usage}
        count = 0
        for m in messages:
            found = re.findall(r"count=(-?\d+)", str(m.get("content") or ""))
            if found and m["role"] in ("tool", "user"):
                count = int(found[-1])
        told = any("submit now" in str(m.get("content", "")).lower() for m in messages if m["role"] == "user")
        if count >= self.target and (not self.overshoot or told or count > self.target):
            calls = [_call("submit", {})]
        elif self.multi:
            calls = [_call("add", {"amount": 1}, 0), _call("add", {"amount": 1}, 1)]
        else:
            calls = [_call("add", {"amount": 1})]
        return {"role": "assistant", "content": "", "tool_calls": calls, "usage": usage}


def make_agent(task: Task, seed: int, spec: dict):
    return CounterAgent(task, seed, overshoot=bool(spec.get("overshoot", False)))


class EnvReportAgent(CounterAgent):
    """Submits at once and reports the worker process's accelerator-related environment."""

    def chat(self, messages, tools):
        keys = ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS")
        return {"role": "assistant", "content": json.dumps({k: os.environ.get(k) for k in keys} | {"pid": os.getpid()}),
                "tool_calls": [_call("submit", {})]}


def make_env_report_agent(task: Task, seed: int, spec: dict):
    return EnvReportAgent(task, seed)
