"""ALFWorld (text, TextWorld engine) as an `Environment` (reference spec §4.2, environments.md §1).

One episode = one shipped `game.tw-pddl` played through `textworld.gym` with ALFWorld's
`AlfredDemangler` / `AlfredInfos` wrappers (as AgentBench's single-game env does). The agent acts
through one tool, `take_action(action)`; its text is mapped to the closest admissible command
(`actions.process_action`) and shown in AgentBench's 0.2.2 `put … in/on …` surface (see
actions.py). Success = the engine's `won`. The episode ends on success, after `max_steps` actions,
or early (reward 0, AGENT_INVALID_ACTION) when the model's last three raw actions are identical
after more than three steps (AgentBench's rule). The first user message and every tool message end
with " AVAILABLE ACTIONS: " and the admissible commands, one per line.

The engine is imported lazily so the task lists, prompts and ctx code work without the extra.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from envs.alfworld import actions as A
from envs.alfworld import downward_libs, engine_memo
from envs.alfworld import tasks as T
from envs.alfworld.world import Tracker
from envs.base import Action, Environment, StepResult, Task

log = logging.getLogger(__name__)

COMPLETED, TASK_LIMIT, INVALID = "COMPLETED", "TASK_LIMIT_REACHED", "AGENT_INVALID_ACTION"
TOOL_NAME = "take_action"
LOW_STEPS = 5                     # predicates.remaining_steps_low threshold (reference)
FACT_CACHE_LIMIT = 50_000         # TextWorld's interned facts kept between games (~1,100 a game)

SYSTEM_PROMPT = """You are an agent acting in a simulated household. You get one household task and carry it out step by step, one action per turn, by calling the `take_action` tool.

How it works:
1. Call `take_action` in every turn with exactly one action; a reply without a tool call does nothing.
2. After every action you see what happened and a list of AVAILABLE ACTIONS. Choose your action from that list and write it exactly as listed, in lowercase, with instance numbers (for example "go to cabinet 2").
3. "Nothing happens." means the action was not valid here; pick a different one.
4. You can carry only one object at a time. Closed receptacles such as fridges, drawers and cabinets have to be opened before you can see or take what is inside.
5. The episode ends as soon as the task is done, or after {max_steps} actions."""

TIPS_HEADER = "Some tips that may help for this task:"


def game_root(data_dir: str = "") -> Path:
    """Folder that holds `json_2.1.1/` (config `alfworld.data_dir`, `$HR1_ALFWORLD_DATA`, or the
    project's unpacked copy, which is unpacked here on first use)."""
    from envs.alfworld import unpack
    if not data_dir:
        return unpack.unpack()
    root = Path(data_dir)
    if not (root / unpack.ROOT_NAME).is_dir():
        raise FileNotFoundError(f"ALFWorld games not found under {root}; run `python -m envs.alfworld.unpack`")
    return root


def trim_fact_cache(limit: int | None = None) -> bool:
    """Empty TextWorld's cache of interned facts once it holds more than `limit` (default
    FACT_CACHE_LIMIT); True if it did.

    TextWorld's logic hands out one object per distinct proposition and signature from `mementos`'
    process-wide cache, which nothing clears: a rollout worker's memory grew with every distinct game
    it opened. The facts compare and hash by value, so a fact built anew after a clear is equal to
    the dropped one; the cost is rebuilding those the next games use."""
    import mementos.core
    if len(mementos.core._memento_cache) <= (FACT_CACHE_LIMIT if limit is None else limit):
        return False
    mementos.core._memento_cache.clear()
    return True


def _section(config):
    from envs.alfworld.config import defaults
    if config is None:
        return defaults()
    return config["alfworld"] if "alfworld" in config else config


class ALFWorldEnv(Environment):
    benchmark = "alfworld"
    env_version = "alfworld-tw0.4.0-put-v1"
    process_all_tool_calls = False
    honours_rewrite_and_force = True

    def __init__(self, config=None):
        c = _section(config)
        self.max_steps = self.max_turns = int(c.max_steps)
        self.put_surface = bool(c.get("put_surface", True))
        self.match_threshold = float(c.get("match_threshold", 0.5))
        self.root = game_root(c.get("data_dir", ""))
        self._game = None
        self.task: Task | None = None

    # --- tasks ---------------------------------------------------------------------------------
    def tasks(self, split: str) -> list[Task]:
        tasks, listed = T.load_split(self.root, split, self.env_version)
        if len(tasks) < listed:
            log.info("alfworld split %s: %d of %d available (the rest are missing from the shipped "
                     "0.4.0 archive)", split, len(tasks), listed)
        return tasks

    # --- prompts -------------------------------------------------------------------------------
    def tool_specs(self) -> list[dict]:
        return [{"type": "function", "function": {
            "name": TOOL_NAME,
            "description": "Perform one action in the household. Choose one of the AVAILABLE ACTIONS "
                           "and write it exactly as listed.",
            "parameters": {"type": "object",
                           "properties": {"action": {"type": "string",
                                                     "description": "The action, e.g. \"go to desk 1\"."}},
                           "required": ["action"]}}}]

    def system_prompt(self, tips: list[str], tool_hint: str) -> str:
        text = SYSTEM_PROMPT.format(max_steps=self.max_steps)
        tips = [t for t in tips if t]
        if tips:
            text += "\n\n" + TIPS_HEADER + "\n" + "\n".join(f"- {t}" for t in tips)
        return text

    # --- episode -------------------------------------------------------------------------------
    def _open_game(self, path: Path):
        engine_memo.install(self.root / "sas_cache")
        downward_libs.install()
        import textworld
        import textworld.gym
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        env_id = textworld.gym.register_games([str(path)], infos, batch_size=1, asynchronous=False,
                                              max_episode_steps=self.max_steps + 10,
                                              wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])
        try:
            return textworld.gym.make(env_id)
        finally:
            # The registration is used once. Kept, it holds the demangler instance, which make()
            # wraps around the game: every game a process ever opened would stay in memory.
            textworld.gym.registry.pop(env_id, None)

    def reset(self, task: Task) -> str:
        if task.benchmark != self.benchmark:
            raise ValueError(f"not an ALFWorld task: {task.benchmark}")
        self.close()
        path = self.root / task.payload["game"]
        argv = list(sys.argv)          # fast-downward's translator overwrites sys.argv
        try:
            self._game = self._open_game(path)
            obs, info = self._game.reset()
        finally:
            sys.argv[:] = argv
        self.task = task
        self.won = False
        self.done = False
        self.status = TASK_LIMIT
        self.steps = 0
        self._last_raw = ""
        self._last_in_admissible = False
        self.admissible = self._surface_admissible(info)
        intro = A.to_surface_observation(obs[0], self.put_surface)
        body = "\n".join(intro.split("\n\n")[1:])
        self.observation = body
        self.tracker = Tracker(body, task.payload["target_type"], task.payload["destination_type"])
        return "Here is your task. " + body + self._suffix()

    def _surface_admissible(self, info) -> list[str]:
        return [A.to_surface_command(c, self.put_surface) for c in info["admissible_commands"][0]]

    def _suffix(self) -> str:
        return " AVAILABLE ACTIONS: " + "\n".join(self.admissible) + "\n"

    def action_from_tool_call(self, name: str, arguments: dict) -> Action | None:
        if name != TOOL_NAME or not isinstance(arguments, dict):
            return None
        raw = arguments.get("action")
        if not isinstance(raw, str) or not raw.strip():
            return None
        self._last_raw = raw
        text = A.process_action(raw, self.admissible, self.match_threshold)
        return Action(TOOL_NAME, {"action": raw}, text) if text else None

    def action_from_hook(self, action: str, current: Action | None, site: str) -> Action | None:
        text = " ".join(str(action or "").lower().split())
        return Action(TOOL_NAME, {"action": text}, text) if text else None

    def step(self, action: Action) -> StepResult:
        if self._game is None or self.done:
            raise RuntimeError("step() called without an active episode")
        text = action.text
        self._last_in_admissible = text in self.admissible
        if not self._last_in_admissible:
            self.tracker.note_invalid()
        obs, _score, _done, info = self._game.step([A.to_engine_command(text)])
        self.steps += 1
        self.won = bool(info["won"][0])
        observation = A.to_surface_observation(obs[0], self.put_surface)
        self.admissible = self._surface_admissible(info)
        self.observation = observation
        self.tracker.update(self._last_raw, text, observation)
        raw = self.tracker.raw_actions
        if self.won:
            self.done, self.status = True, COMPLETED
        elif len(raw) > 3 and raw[-1] == raw[-2] == raw[-3]:
            self.done, self.status = True, INVALID
        elif self.steps >= self.max_steps:
            self.done, self.status = True, TASK_LIMIT
        reward = 1.0 if self.won else 0.0
        nothing = "nothing happens" in observation.lower()
        return StepResult(observation + self._suffix(), reward, self.done,
                          {"won": self.won, "status": self.status, "nothing_happens": nothing,
                           "step_reward": 0.0 if nothing else reward})

    # --- hooks -----------------------------------------------------------------------------------
    def hook_context(self, site: str, *, turn: int, action: Action | None = None,
                     raw_output: str = "") -> dict:
        remaining = self.max_steps - turn - (1 if site == "on_post_step" else 0)
        payload = self.task.payload
        tr = self.tracker
        if action is not None:
            raw = self._last_raw or action.text      # the model's own text, even when forced
            act = {"raw": raw, "normalized": " ".join((action.text or raw).lower().split()),
                   "final_action": action.text,
                   # after a step: judged against the list shown before it was executed
                   "in_admissible": (self._last_in_admissible if site == "on_post_step"
                                     else action.text in self.admissible)}
        else:
            act = {"raw": "", "normalized": "", "final_action": "", "in_admissible": False}
        state = tr.state(remaining)
        blocked_or_invalid = action is not None and not act["in_admissible"]
        # Fresh containers, no copy: the hook call copies ctx once (frozen inline, pickled to the
        # hook process) before any hook code sees it.
        return {
            "action": act,
            "state": state,
            "task": {"task_type": payload["task_type"], "target_type": payload["target_type"],
                     "destination_type": payload["destination_type"], "goal": payload["goal"],
                     "task": payload["goal"]},
            "predicates": {
                "action_not_admissible": blocked_or_invalid,
                "nothing_happens_repeated": state["nothing_happens_count"] >= 2,
                "same_observation_repeated": state["repeated_observation_count"] >= 2,
                "same_action_repeated": state["repeated_action_count"] >= 2,
                "remaining_steps_low": remaining <= LOW_STEPS,
            },
            "observation": self.observation,
            "admissible": list(self.admissible),
            "output": raw_output,
            "step": turn,
            "max_step": self.max_steps,
            "remaining_steps": remaining,
            "history": tr.history(),
            "world": tr.world(),
        }

    def final_result(self) -> dict:
        status = self.status if self.done else TASK_LIMIT
        return {"reward": 1.0 if self.won else 0.0, "success": self.won, "status": status,
                "steps": self.steps, "invalid_actions": self.tracker.invalid_action_count if self.task else 0}

    def manifest_extras(self, task: Task) -> dict:
        return {"game": task.payload["game"], "game_sha256": task.payload["game_sha256"]}

    def close(self) -> None:
        if self._game is not None:
            try:
                self._game.close()
            except Exception:  # a dead engine must not mask the episode's result
                log.exception("closing the ALFWorld game failed")
            self._game = None
            trim_fact_cache()
