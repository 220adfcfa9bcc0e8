"""Where a report's numbers come from: the code's commit, the config's hash, the date, the target,
the engineer checkpoint and the data sources (each benchmark's descriptor names its own, from its
config section and what its results recorded, e.g. the SQL backend)."""
from __future__ import annotations

import datetime
import glob
import hashlib
import json
import os
import subprocess

from envs.registry import benchmark as descriptor

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def git_commit(repo: str = REPO) -> str:
    """The commit of the code that ran, marked when the checkout has uncommitted changes."""
    def git(*args):
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, timeout=30)
    try:
        head = git("rev-parse", "--short=12", "HEAD")
        if head.returncode != 0:
            return "unknown (not a git checkout)"
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (git did not answer)"
    return head.stdout.strip() + (" + uncommitted changes" if dirty else "")


def config_sha256(config: dict) -> str:
    """A short hash of the resolved config (key order does not matter)."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def stage_config(folder: str) -> tuple[str, dict] | None:
    """(file name, config) of the newest `config.<stage>.json` in `folder`: what `hr1 <stage>` wrote
    when it started, so the stage writing a report finds its own."""
    paths = sorted(glob.glob(os.path.join(folder, "config.*.json")), key=os.path.getmtime)
    if not paths:
        return None
    with open(paths[-1], encoding="utf-8") as f:
        return os.path.basename(paths[-1]), json.load(f)


def recorded_values(root: str, benchmark: str, key: str) -> list[str]:
    """Every value of `final[key]` recorded in the benchmark's results under `root` ("" = none)."""
    found = set()
    if not root:
        return []
    for path in glob.glob(os.path.join(root, "**", benchmark, "*", "results.jsonl"), recursive=True):
        with open(path, encoding="utf-8") as f:
            for line in f:
                value = (json.loads(line).get("final") or {}).get(key)
                if value:
                    found.add(str(value))
    return sorted(found)


def trained_step(checkpoint: str) -> int | None:
    """The training step of an engineer folder (`W/grpo` or `W/grpo/final_params`): the newest
    step saved under its `checkpoints/`, None when there is none (an endpoint, a name)."""
    for folder in (checkpoint, os.path.dirname(os.path.normpath(checkpoint))):
        ckpts = os.path.join(folder, "checkpoints")
        steps = [int(n) for n in os.listdir(ckpts) if n.isdigit()] if os.path.isdir(ckpts) else []
        if steps:
            return max(steps)
    return None


def describe_target(target: dict) -> str:
    kind = target.get("kind", "?")
    who = target.get("model") or target.get("name") or ""
    where = f" at {target['base_url']}" if kind == "openai" and target.get("base_url") else ""
    return f"{kind} {who}{where}".strip()


def data_sources(benchmarks, config: dict | None = None, results_root: str = "") -> dict[str, str]:
    """One line per benchmark naming its data, as its descriptor words it from its config section
    and what its results under `results_root` recorded."""
    config = config or {}
    return {bench: descriptor(bench).data_source(
                dict(config.get(bench) or {}), lambda key, b=bench: recorded_values(results_root, b, key))
            for bench in benchmarks}


def collect(workdir: str, benchmarks, *, config: dict | None = None, config_label: str = "") -> dict:
    """Provenance of a stage's results in `workdir` (config: the given one, else the stage's own file)."""
    if config is None:
        found = stage_config(workdir)
        config_label, config = found if found else ("", None)
    engineer = str(((config or {}).get("eval") or {}).get("engineer") or "")
    step = trained_step(engineer) if engineer and os.path.isdir(engineer) else None
    return {
        "commit": git_commit(),
        "config": f"{config_label or 'config'} sha256:{config_sha256(config)}" if config else "unknown",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "target": describe_target(config.get("target") or {}) if config else "unknown",
        "engineer": (f"{engineer} (training step {step})" if step is not None else engineer) if engineer else "",
        "engineer_step": step,
        "data": data_sources(benchmarks, config, os.path.join(workdir, "baseline")),
    }
