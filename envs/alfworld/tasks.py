"""ALFWorld task lists and goal parsing (environments.md §1b, reference spec §4.2).

Splits (paths in `data/splits/*.json`, relative to the unpacked game root):
  harness_r1_test  (alias `test`) Harness-R1's 500-game test list in its original order, restricted to the
                   games the shipped archive has: 432 of 500 available (the other 68 exist only
                   in ALFWorld's older 0.2.2 release; see data/SOURCE.md).
  standard / dev / new_std   AgentBench's lists (50/50, 20/20, 93 of 109 available).
  train            AgentBench `train_valid` games that are in no test list above and are
                   available (the training pool for the engineer).
Task identity payload = game path (relative), sha256 of the game file, env version, goal text and
parsed task type; the game's walkthrough goes to `Task.oracle` (scripted target only).
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from pathlib import Path

from envs.base import Task

SPLITS_DIR = Path(__file__).resolve().parent / "data" / "splits"
SPLIT_FILES = {
    "harness_r1_test": "harness_r1_test_set.json",
    "standard": "agentbench_standard.json",
    "dev": "agentbench_dev.json",
    "new_std": "agentbench_new_std.json",
    "train": "agentbench_train_valid.json",
}
TEST_SPLITS = ("harness_r1_test", "standard", "dev", "new_std")
# "test" is the name every benchmark's test split answers to (config.split defaults to it).
ALIASES = {"test": "harness_r1_test"}
TASK_TYPES = ("pick_and_place", "pick_clean_then_place", "pick_heat_then_place",
              "pick_cool_then_place", "look_at_obj", "pick_two_obj")

_GOAL_RE = re.compile(r"Your task is to: ([^\"\\\n]*)")
# Goal templates of the ALFWorld grammar (12 surface forms over the six families).
_GOAL_PATTERNS = [
    (re.compile(r"^(?:look at|examine) (?:the )?(\w+) (?:under|with) the (\w+)\.?$"), "look_at_obj"),
    (re.compile(r"^(?:find two|put two) (\w+) (?:and put them )?in (\w+)\.?$"), "pick_two_obj"),
    (re.compile(r"^clean some (\w+) and put it in (\w+)\.?$"), "pick_clean_then_place"),
    (re.compile(r"^put a clean (\w+) in (\w+)\.?$"), "pick_clean_then_place"),
    (re.compile(r"^heat some (\w+) and put it in (\w+)\.?$"), "pick_heat_then_place"),
    (re.compile(r"^put a hot (\w+) in (\w+)\.?$"), "pick_heat_then_place"),
    (re.compile(r"^cool some (\w+) and put it in (\w+)\.?$"), "pick_cool_then_place"),
    (re.compile(r"^put a cool (\w+) in (\w+)\.?$"), "pick_cool_then_place"),
    (re.compile(r"^put (?:a|some) (\w+) (?:in|on) (\w+)\.?$"), "pick_and_place"),
]


def parse_goal(goal: str) -> dict:
    """`task_type` (one of TASK_TYPES), `target_type`, `destination_type` from a goal sentence
    ("cool some pan and put it in countertop."); unknown forms give empty fields."""
    text = " ".join(goal.lower().split())
    if text.startswith("your task is to:"):
        text = text[len("your task is to:"):].strip()
    for pattern, task_type in _GOAL_PATTERNS:
        m = pattern.match(text)
        if m:
            return {"task_type": task_type, "target_type": m.group(1), "destination_type": m.group(2)}
    return {"task_type": "", "target_type": "", "destination_type": ""}


def family_of_path(rel_path: str) -> str:
    """The task family from the game folder name (`pick_cool_then_place_in_recep-Pan-...`)."""
    folder = rel_path.split("/")[2]
    prefix = folder.split("-")[0]
    for t in TASK_TYPES:
        if prefix.startswith(t):
            return t
    return prefix


def split_paths(name: str) -> list[str]:
    """All relative game paths listed for a split (available or not), in file order."""
    if name not in SPLIT_FILES:
        raise ValueError(f"unknown ALFWorld split {name!r}; expected one of {sorted(SPLIT_FILES)}")
    with open(SPLITS_DIR / SPLIT_FILES[name]) as f:
        lists = json.load(f)
    return [p for paths in lists.values() for p in paths]


def game_info(game_root: Path, rel_path: str) -> tuple[dict, dict]:
    """(payload, oracle) of one game file."""
    raw = (game_root / rel_path).read_bytes()
    game = json.loads(raw)
    m = _GOAL_RE.search(game["grammar"])
    goal = m.group(1).strip() if m else ""
    payload = {"game": rel_path, "game_sha256": hashlib.sha256(raw).hexdigest(), "goal": goal,
               **parse_goal(goal)}
    oracle = {"walkthrough": list(game.get("walkthrough") or []), "solvable": bool(game.get("solvable", True))}
    return payload, oracle


@functools.lru_cache(maxsize=16)
def _load(game_root: str, name: str, env_version: str) -> tuple[tuple[Task, ...], int]:
    root = Path(game_root)
    if name == "train":
        held_out = {p for s in TEST_SPLITS for p in split_paths(s)}
        listed = [p for p in split_paths("train") if p not in held_out]
    else:
        listed = split_paths(name)
    seen: set[str] = set()
    available = []
    for p in listed:
        if p not in seen and (root / p).is_file():
            seen.add(p)
            available.append(p)
    tasks = []
    for i, rel in enumerate(available):
        payload, oracle = game_info(root, rel)
        payload["env_version"] = env_version
        tasks.append(Task("alfworld", name, i, payload, oracle))
    return tuple(tasks), len(listed)


def load_split(game_root: Path, name: str, env_version: str) -> tuple[list[Task], int]:
    """(available tasks in listed order, number listed); aliases resolve to the canonical name."""
    name = ALIASES.get(name, name)
    tasks, listed = _load(str(game_root), name, env_version)
    return list(tasks), listed


def balanced_sample(tasks: list[Task], n: int) -> list[Task]:
    """`n` tasks taken round-robin over the task families (sorted), each family in list order, so
    small batches cover every family."""
    by_family: dict[str, list[Task]] = {}
    for t in tasks:
        by_family.setdefault(t.payload["task_type"], []).append(t)
    out: list[Task] = []
    depth = 0
    while len(out) < min(n, len(tasks)):
        for family in sorted(by_family):
            if depth < len(by_family[family]) and len(out) < n:
                out.append(by_family[family][depth])
        depth += 1
    return out
