"""DBBench task loading: splits, stable identities, and the split between payload and oracle.

Splits: `test` = AgentBench `standard.jsonl` (300 tasks, Harness-R1's DBBench test set), `dev` =
`dev.jsonl` (60); `dbbench.task_files` names more (or replacement) files in the same format. `task_id` is the line index. The identity is `sha256(canonical task JSON) +
env_version`, so a changed line or changed mechanics yields a different identity.

`Task.payload` holds everything needed to run the episode (question, table, type) but no gold;
`Task.oracle` holds the gold (`label`, `answer_md5`, the unreliable `sql.query`) for the judge and
scripted agents only.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib

from envs.base import Task

DATA_DIR = pathlib.Path(__file__).resolve().parent / "data"
SPLIT_FILES = {"test": "standard.jsonl", "dev": "dev.jsonl"}
MUTATION_TYPES = ("INSERT", "UPDATE", "DELETE")
_GOLD_KEYS = ("label", "answer_md5", "sql")


def entry_sha256(entry: dict) -> str:
    return hashlib.sha256(json.dumps(entry, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def task_from_entry(entry: dict, split: str, task_id: int, env_version: str) -> Task:
    if not isinstance(entry.get("table"), dict) or "table_info" not in entry["table"]:
        raise ValueError(f"dbbench {split}[{task_id}]: entry has no table")
    public = {k: v for k, v in entry.items() if k not in _GOLD_KEYS}
    payload = {"entry": public, "task_sha256": entry_sha256(entry), "env_version": env_version}
    oracle = {"label": list(entry.get("label") or []), "answer_md5": entry.get("answer_md5", ""),
              "sql": (entry.get("sql") or {}).get("query", "")}
    return Task(benchmark="dbbench", split=split, task_id=task_id, payload=payload, oracle=oracle)


@functools.lru_cache(maxsize=8)
def _read_split(path: str) -> tuple[dict, ...]:
    entries = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            if line.strip():
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n + 1}: bad JSON ({e})") from None
    return tuple(entries)


def parse_task_files(spec: str) -> dict[str, str]:
    """`"train=/a.jsonl,test=/b.jsonl"` -> {split: path}; a malformed entry is a ValueError."""
    out = {}
    for part in [p.strip() for p in str(spec or "").split(",") if p.strip()]:
        split, eq, path = part.partition("=")
        if not eq or not split.strip() or not path.strip():
            raise ValueError(f"dbbench.task_files: expected 'split=path', got {part!r}")
        out[split.strip()] = os.path.expanduser(path.strip())
    return out


def split_path(split: str, data_dir: pathlib.Path | str = DATA_DIR, task_files: str = "") -> str:
    """The file behind a split: a `task_files` entry, else the shipped file."""
    files = {name: str(pathlib.Path(data_dir) / f) for name, f in SPLIT_FILES.items()}
    files.update(parse_task_files(task_files))
    if split not in files:
        raise KeyError(f"dbbench has no split {split!r}; splits: {sorted(files)} "
                       "(more through dbbench.task_files='split=path')")
    return files[split]


def load_split(split: str, env_version: str, data_dir: pathlib.Path | str = DATA_DIR,
               task_files: str = "") -> list[Task]:
    entries = _read_split(split_path(split, data_dir, task_files))
    return [task_from_entry(e, split, i, env_version) for i, e in enumerate(entries)]


def task_type(entry: dict) -> str:
    types = entry.get("type") or ["other"]
    return str(types[0] if isinstance(types, list) else types)


def is_mutation(entry: dict) -> bool:
    return task_type(entry).upper() in MUTATION_TYPES
