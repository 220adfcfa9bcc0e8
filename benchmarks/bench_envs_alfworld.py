"""ALFWorld episode throughput with the scripted target (real TextWorld engine).

    .venv/bin/python benchmarks/bench_envs_alfworld.py [--tasks 8] [--split harness_r1_test]
        [--skill 0.6] [--seed 0] [--reference-patches] [--compare [--rounds 3]] [--memory N [--rounds 1]]

Prints the median reset time, step time, episode time and steps per episode, and episodes/s
(one process). With --reference-patches it also runs every shipped reference ALFWorld patch on
the same tasks and prints, per patch, success next to the unpatched baseline and the hook
exception rate (errors + time-outs over hook calls).

With --compare it times the engine memos (envs/alfworld/engine_memo.py) and the reused
fast-downward library copies (envs/alfworld/downward_libs.py) against the engine with the PDDL
translation memo alone and a library copy per game (`HR1_ALFWORLD_ENGINE_MEMO=0`,
`HR1_ALFWORLD_LIB_REUSE=0`: the code before both), the memos with an empty translation folder (a
machine's first play of these games) and with every translation already stored (any later
process), the latter also with a library copy per game. Each round starts one fresh process per
engine, the order rotating, and each process plays the batch twice: the first play of every game
(as in a fresh rollout worker) and a replay (as a rerun of the same tasks). It prints the medians
over rounds, the median of the rounds' ratios to the baseline and of reuse against a copy per game,
what each process held at the end (library copies mapped, memory growth per replayed episode),
whether every process played the very same episodes, and the load.

With --memory N it plays N distinct games once each in fresh processes, the engine as it is against
the engine as TextWorld leaves it (every game's `textworld.gym` registration kept, which holds the
whole game, and TextWorld's cache of interned facts never emptied: envs/alfworld/env.py drops the
first and bounds the second), both translating every game in-process (no translation folder). It
prints each process's memory after the first third of the games and at the end, its growth per game
over the last two thirds, and what it still holds once its last game is closed: games (TextWorld
`PddlEnv` objects; TatSu's last parse error can hold one), interned facts and registrations.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import ml_collections  # noqa: E402

from envs.alfworld import downward_libs, unpack  # noqa: E402
from envs.alfworld import env as alfworld_env  # noqa: E402
from envs.alfworld.config import defaults  # noqa: E402
from envs.alfworld.env import ALFWorldEnv  # noqa: E402
from envs.alfworld.tasks import balanced_sample  # noqa: E402
from envs.alfworld.scripted import ScriptedAgent  # noqa: E402
from hr1_jax.patch.guards import rss_bytes  # noqa: E402
from hr1_jax.runtime import run_episode  # noqa: E402
from machine_state import CpuWindow, load_text  # noqa: E402  (benchmarks/, the script's folder)

PATCH_DIR = REPO / "hr1_jax" / "patch" / "reference_patches" / "examples" / "heldout_generalization"


class TimedEnv(ALFWorldEnv):
    """Records the wall time of every reset and step."""

    def __init__(self, config):
        super().__init__(config)
        self.reset_s: list[float] = []
        self.step_s: list[float] = []

    def reset(self, task):
        t0 = time.perf_counter()
        try:
            return super().reset(task)
        finally:
            self.reset_s.append(time.perf_counter() - t0)

    def step(self, action):
        t0 = time.perf_counter()
        try:
            return super().step(action)
        finally:
            self.step_s.append(time.perf_counter() - t0)


def run_batch(env, tasks, agent_cfg, seed, patch=None):
    results = []
    for task in tasks:
        results.append(run_episode(env, ScriptedAgent(task, seed, agent_cfg), task, patch, seed=seed))
    return results


def reference_patches(patch_dir: Path) -> list[Path]:
    return sorted(patch_dir.glob("*/seed*/alfworld.json"))


def _episodes_sha(results) -> str:
    return hashlib.sha256(json.dumps([[r.trajectory, r.actions, r.final, r.reward, r.status] for r in results],
                                     sort_keys=True, default=str).encode()).hexdigest()[:16]


def _same_episodes(runs: dict) -> tuple[bool, str]:
    """Whether every process of every engine played the very same episodes, and their digests."""
    shas = {sha for rs in runs.values() for r in rs for sha in r["sha"]}
    return len(shas) == 1, ", ".join(sorted(shas))


def child(env, tasks, agent_cfg, seed) -> dict:
    """One engine process of --compare: the batch's first play, then its replay."""
    t0 = time.perf_counter()
    first = run_batch(env, tasks, agent_cfg, seed)
    first_s = time.perf_counter() - t0
    rss_first = rss_bytes()
    env.reset_s.clear()
    env.step_s.clear()
    t0 = time.perf_counter()
    replay = run_batch(env, tasks, agent_cfg, seed)
    replay_s = time.perf_counter() - t0
    return {"first_s": first_s, "replay_s": replay_s, "reset_ms": 1e3 * statistics.median(env.reset_s),
            "step_ms": 1e3 * statistics.median(env.step_s), "steps": len(env.step_s),
            "lib_copies": downward_libs.mapped_copies(), "growth_mb": (rss_bytes() - rss_first) / 2**20 / len(replay),
            "sha": [_episodes_sha(first), _episodes_sha(replay)]}


BASELINE = "translation memo only, a library copy per game"
REUSED, PER_GAME = "engine memos, translations on disk", "engine memos, translations on disk, a library copy per game"
# name: (the translation folder its processes use, library copies reused); folder None:
# HR1_ALFWORLD_ENGINE_MEMO=0, the engine with the in-process translation memo alone; "empty" is a
# fresh folder per process, "stored" the prefilled one
ENGINES = {BASELINE: (None, False), "engine memos, no translation on disk": ("empty", True),
           PER_GAME: ("stored", False), REUSED: ("stored", True)}
KEYS = ("first_s", "replay_s", "reset_ms", "step_ms")


def _engine_env(folder_kind: str | None, reuse: bool, folder: str, rnd: int) -> dict:
    env = dict(os.environ, HR1_ALFWORLD_LIB_REUSE="1" if reuse else "0")
    if folder_kind is None:
        return dict(env, HR1_ALFWORLD_ENGINE_MEMO="0")
    sub = f"empty{rnd}" if folder_kind == "empty" else "stored"
    return dict(env, HR1_ALFWORLD_ENGINE_MEMO="1", HR1_ALFWORLD_SAS_CACHE=os.path.join(folder, sub))


def _run_child(argv, env) -> dict | None:
    proc = subprocess.run([sys.executable, __file__, *argv, "--child"], env=env, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(args, argv) -> int:
    print(f"alfworld engine memos and reused library copies vs {BASELINE}: {args.tasks} tasks of {args.split}, "
          f"seed {args.seed}, {args.rounds} rounds of fresh processes (order rotating); load {load_text()}")
    runs = {name: [] for name in ENGINES}
    with tempfile.TemporaryDirectory() as folder:
        if _run_child(argv, _engine_env("stored", True, folder, 0)) is None:   # stores every game's translation
            return 1
        window = CpuWindow()
        for rnd in range(args.rounds):
            names = list(ENGINES)
            for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                run = _run_child(argv, _engine_env(*ENGINES[name], folder, rnd))
                if run is None:
                    return 1
                runs[name].append(run)
    held = ("lib_copies", "growth_mb")
    med = {name: {k: statistics.median(r[k] for r in rs) for k in KEYS + held} for name, rs in runs.items()}

    def ratios(base: str, name: str) -> dict:
        return {k: statistics.median(b[k] / m[k] for b, m in zip(runs[base], runs[name])) for k in KEYS}

    ratio = {name: ratios(BASELINE, name) for name in runs if name != BASELINE}
    reuse = ratios(PER_GAME, REUSED)
    print("\n| engine | first play s | replay s | reset ms (replay) | step ms (replay) | library copies mapped | "
          "memory growth MB per replayed episode |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for name, m in med.items():
        print(f"| {name} | {m['first_s']:.2f} | {m['replay_s']:.2f} | {m['reset_ms']:.1f} | {m['step_ms']:.1f} | "
              f"{m['lib_copies']:.0f} | {m['growth_mb']:.2f} |")
    for name, r in list(ratio.items()) + [(f"{REUSED}: reuse over a copy per game", reuse)]:
        print(f"| speedup, {name} (median of the rounds' ratios) | {r['first_s']:.2f}x | {r['replay_s']:.2f}x | "
              f"{r['reset_ms']:.2f}x | {r['step_ms']:.2f}x | | |")
    same, digests = _same_episodes(runs)
    print(f"\nsame episodes in every process and play: {'yes' if same else 'NO'} ({digests}); "
          f"{runs[BASELINE][0]['steps']} steps a play; load after {load_text()}, steal {window.steal_text()}")
    print("BENCH_ALFWORLD_MEMO " + json.dumps({"medians": med, "ratios": ratio, "reuse_ratios": reuse,
                                               "same_episodes": same}))
    return 0 if same else 1


def keep_every_game() -> None:
    """This process's engine as TextWorld leaves it: every game's registration kept (its pop is a
    no-op), the cache of interned facts never emptied (the --memory baseline)."""
    import textworld.gym
    import textworld.gym.utils

    class KeptRegistry(dict):
        def pop(self, key, default=None):
            return self.get(key, default)

    kept = KeptRegistry(textworld.gym.registry)
    textworld.gym.registry = textworld.gym.utils.registry = kept
    alfworld_env.trim_fact_cache = lambda limit=0: False


def memory_child(env, tasks, agent_cfg, seed) -> dict:
    """One process of --memory: every game played once; memory after the first third and at the end."""
    import gc

    import mementos.core
    import textworld.gym
    from textworld.envs.pddl.pddl import PddlEnv
    warm = max(1, len(tasks) // 3)
    results = run_batch(env, tasks[:warm], agent_cfg, seed)
    gc.collect()
    rss_warm = rss_bytes()
    results += run_batch(env, tasks[warm:], agent_cfg, seed)
    env.close()
    gc.collect()
    rss_end = rss_bytes()
    return {"games": len(tasks), "rss_warm_mb": rss_warm / 2**20, "rss_end_mb": rss_end / 2**20,
            "growth_mb": (rss_end - rss_warm) / 2**20 / max(1, len(tasks) - warm),
            "games_held": sum(type(o) is PddlEnv for o in gc.get_objects()),
            "facts_held": len(mementos.core._memento_cache), "registrations": len(textworld.gym.registry),
            "sha": [_episodes_sha(results)]}


MEMORY_ENGINES = {"as TextWorld leaves it: registrations kept, facts never dropped": "kept",
                  "registrations dropped, facts bounded": "dropped"}


def memory(args, argv) -> int:
    print(f"alfworld process memory over {args.memory} distinct games of {args.split} (seed {args.seed}), one fresh "
          f"process per engine and round, {args.rounds} round(s), no translation folder; load {load_text()}")
    runs = {name: [] for name in MEMORY_ENGINES}
    child_env = dict(os.environ, HR1_ALFWORLD_SAS_CACHE="")
    for rnd in range(args.rounds):
        names = list(MEMORY_ENGINES)[::-1 if rnd % 2 else 1]
        for name in names:
            run = _run_child([*argv, "--memory-engine", MEMORY_ENGINES[name]], child_env)
            if run is None:
                return 1
            runs[name].append(run)
    keys = ("rss_warm_mb", "rss_end_mb", "growth_mb", "games_held", "facts_held", "registrations")
    med = {name: {k: statistics.median(r[k] for r in rs) for k in keys} for name, rs in runs.items()}
    warm = max(1, args.memory // 3)
    print(f"\n| engine | MB after {warm} games | MB after {args.memory} | growth MB per game (games {warm + 1}-"
          f"{args.memory}) | games held | interned facts held | registrations held |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    for name, m in med.items():
        print(f"| {name} | {m['rss_warm_mb']:.0f} | {m['rss_end_mb']:.0f} | {m['growth_mb']:.2f} | "
              f"{m['games_held']:.0f} | {m['facts_held']:.0f} | {m['registrations']:.0f} |")
    same, digests = _same_episodes(runs)
    print(f"\nsame episodes in every process: {'yes' if same else 'NO'} ({digests}); "
          f"load after {load_text()}")
    print("BENCH_ALFWORLD_MEMORY " + json.dumps({"medians": med, "same_episodes": same}))
    return 0 if same else 1


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--split", default="harness_r1_test")
    ap.add_argument("--skill", type=float, default=0.6)
    ap.add_argument("--hint-follow-prob", type=float, default=0.7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference-patches", action="store_true")
    ap.add_argument("--patch-dir", type=Path, default=PATCH_DIR)
    ap.add_argument("--compare", action="store_true", help="engine memos and reused library copies vs neither")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memory", type=int, default=0, metavar="N",
                    help="process memory over N distinct games, kept games and facts vs dropped")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--memory-engine", choices=("kept", "dropped"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.compare and args.memory:
        ap.error("--compare and --memory are separate runs")
    if args.compare and not args.child:
        return compare(args, argv)
    if args.memory and not args.child:
        return memory(args, argv)

    unpack.unpack()
    env = TimedEnv(defaults())
    all_tasks = env.tasks(args.split)
    tasks = balanced_sample(all_tasks, args.tasks)
    agent_cfg = ml_collections.ConfigDict({"skill": args.skill, "hint_follow_prob": args.hint_follow_prob})
    if args.child and args.memory:
        if args.memory_engine == "kept":
            keep_every_game()
        print(json.dumps(memory_child(env, balanced_sample(all_tasks, args.memory), agent_cfg, args.seed)))
        return 0
    if args.child:
        print(json.dumps(child(env, tasks, agent_cfg, args.seed)))
        return 0
    print(f"alfworld split={args.split} ({len(all_tasks)} available tasks; harness_r1_test = 432 of 500), "
          f"{len(tasks)} tasks, skill={args.skill}, hint_follow_prob={args.hint_follow_prob}")

    t0 = time.perf_counter()
    base = run_batch(env, tasks, agent_cfg, args.seed)
    wall = time.perf_counter() - t0
    ep_s = [r.wall_s for r in base]
    steps = [r.counts["env_steps"] for r in base]
    print(f"reset_s median {statistics.median(env.reset_s):.3f}  step_s median {statistics.median(env.step_s):.4f}  "
          f"episode_s median {statistics.median(ep_s):.2f}  steps/episode median {statistics.median(steps):g}")
    print(f"episodes/s {len(base) / wall:.3f}  (batch of {len(base)} in {wall:.1f}s)  "
          f"baseline success {sum(r.success for r in base)}/{len(base)}  "
          f"statuses {json.dumps({s: sum(r.status == s for r in base) for s in sorted({r.status for r in base})})}")

    if args.reference_patches:
        from hr1_jax.patch import compile_patch
        base_ok = [r.success for r in base]
        print(f"{'patch':<44} {'success':>8} {'rescued':>8} {'broken':>7} {'hook_calls':>10} {'exc_rate':>9}")
        for path in reference_patches(args.patch_dir):
            patch = compile_patch(json.loads(path.read_text()), "alfworld")
            res = run_batch(env, tasks, agent_cfg, args.seed, patch)
            calls = sum(r.counts["hook_calls"] for r in res)
            exc = sum(r.counts["hook_errors"] + r.counts["hook_timeouts"] for r in res)
            ok = [r.success for r in res]
            name = str(path.relative_to(args.patch_dir))
            print(f"{name:<44} {sum(ok):>4}/{len(ok):<3} {sum(p and not b for p, b in zip(ok, base_ok)):>8} "
                  f"{sum(b and not p for p, b in zip(ok, base_ok)):>7} {calls:>10} {exc / max(1, calls):>9.4f}")
    env.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
