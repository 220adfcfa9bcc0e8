"""Where a report's numbers come from: the code's commit, the config's hash, the date, the target,
the engineer checkpoint and the data sources (WebShop is the substitute; DBBench names the SQL
backend its results recorded)."""
from __future__ import annotations

import datetime
import glob
import hashlib
import json
import os
import subprocess

from hr1_jax.rollout.batches import WEBSHOP_NOTE

WEBSHOP_REAL = "WebShop REAL data"   # webshop.data_dir: the real product and goal files
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA_SOURCES = {"alfworld": "ALFWorld: the real TextWorld games (ALFWorld 0.4.0 files)"}


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


def dbbench_backends(root: str) -> list[str]:
    """Every SQL backend recorded in the DBBench results under `root` (`final["backend"]`)."""
    found = set()
    for path in glob.glob(os.path.join(root, "**", "dbbench", "*", "results.jsonl"), recursive=True):
        with open(path, encoding="utf-8") as f:
            for line in f:
                backend = (json.loads(line).get("final") or {}).get("backend")
                if backend:
                    found.add(str(backend))
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


def data_sources(benchmarks, backends: list[str], config: dict | None = None) -> dict[str, str]:
    """One line per benchmark naming its data: user task files (DBBench) and the WebShop data mode
    come from the run's config."""
    config = config or {}
    out = {}
    for bench in benchmarks:
        if bench == "dbbench":
            files = str((config.get("dbbench") or {}).get("task_files") or "")
            tasks = f"tasks from {files} (else the shipped AgentBench files)" if files else "the AgentBench tasks"
            out[bench] = f"DBBench: {tasks} on {' + '.join(backends) or 'an unrecorded SQL backend'}"
        elif bench == "webshop":
            data_dir = (config.get("webshop") or {}).get("data_dir") or ""
            out[bench] = (f"{WEBSHOP_REAL} from {data_dir} (items_shuffle, items_ins_v2, items_human_ins)"
                          if data_dir else WEBSHOP_NOTE)
        else:
            out[bench] = DATA_SOURCES.get(bench, bench)
    return out


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
        "data": data_sources(benchmarks, dbbench_backends(os.path.join(workdir, "baseline")), config),
    }
