"""The CPU train step under each process setup the launch scripts could give it: the time a step
takes back to back and after a pause (as a GRPO step's update follows sampling and reruns), its minor
page faults and its kernel CPU time.

    .venv/bin/python benchmarks/bench_host_env.py [--configs demo,20m] [--steps 7] [--pause 1.0] [--rounds 2]

Setups (`hr1_jax.utils.host_env`), each in its own process, the processes alternated over `--rounds`:
  * job: the launch scripts' glibc tunables (huge pages, freed blocks kept in the heap) and XLA:CPU
    computations on the calling thread, as `hr1` runs under them;
  * hugepages: `glibc.malloc.hugetlb=1` alone with JAX's default dispatch (what the launch scripts
    set before; the baseline of the ratios);
  * plain: no tunables.
Each process builds the config's model and `bench_model.py`'s train step (AdamW, fused CE), warms it
up, then times `--steps` steps back to back and `--steps` steps each after `--pause` seconds asleep.
Printed per config and setup: medians over all rounds' steps, and ours over the baseline's in the
same run (a ratio above 1 is faster); the load average at start and end and the steal share of CPU
time. A fault on a VM whose guest returns freed pages to its host can cost the host's backing of the
page too, so the paused column shows what the tunables keep.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from hr1_jax.utils.host_env import TUNABLES, with_job_malloc  # noqa: E402
from machine_state import CpuWindow, load_text  # noqa: E402

SETUPS = ("job", "hugepages", "plain")
BASELINE = "hugepages"


def setup_env(setup: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    if setup == "job":
        return with_job_malloc(env)
    if setup == "hugepages":
        env["GLIBC_TUNABLES"] = TUNABLES[0]
    return env


def child(config: str, steps: int, pause: float) -> dict:
    """Runs in the setup's process: the step's samples (ms, minor faults, kernel ms) both ways."""
    from hr1_jax.utils.host_env import configure_jax
    configure_jax()
    import jax
    from flax import nnx

    from bench_model import CONFIGS, make_batch, make_trainer
    from hr1_jax.models import build_model
    cfg = CONFIGS[config]
    trainer = make_trainer(build_model(cfg, nnx.Rngs(0)))
    batch = make_batch(cfg.vocab_size, 8, 512)

    def step():
        before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        jax.block_until_ready(trainer.step(batch))
        ms, after = (time.perf_counter() - t0) * 1e3, resource.getrusage(resource.RUSAGE_SELF)
        return ms, after.ru_minflt - before.ru_minflt, (after.ru_stime - before.ru_stime) * 1e3

    for _ in range(2):
        step()
    back_to_back = [step() for _ in range(steps)]
    paused = []
    for _ in range(steps):
        time.sleep(pause)
        paused.append(step())
    return {"back_to_back": back_to_back, "paused": paused}


def run_setup(setup: str, config: str, args) -> dict:
    cmd = [sys.executable, __file__, "--child", config, "--steps", str(args.steps), "--pause", str(args.pause)]
    out = subprocess.run(cmd, env=setup_env(setup), capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise RuntimeError(f"{setup} {config} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default="demo,20m")
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--pause", type=float, default=1.0, help="seconds asleep before each paused step")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.pause)))
        return 0
    if args.steps < 1 or args.rounds < 1 or args.pause < 0:
        ap.error("--steps and --rounds must be >= 1, --pause >= 0")
    print(f"train step [8 x 512] per process setup; {args.steps} steps back to back and {args.steps} after "
          f"{args.pause:g} s asleep, per process, {args.rounds} rounds of alternated processes; "
          f"cpu cores {os.cpu_count()}; load {load_text()}", flush=True)
    window = CpuWindow()
    samples = {(c, s): {"back_to_back": [], "paused": []} for c in args.configs.split(",") for s in SETUPS}
    for r in range(args.rounds):
        for config in args.configs.split(","):
            for setup in (SETUPS if r % 2 == 0 else SETUPS[::-1]):
                for way, rows in run_setup(setup, config, args).items():
                    samples[(config, setup)][way] += rows
    med = statistics.median
    print(f"\nratio: the {BASELINE} setup's median step time over this row's, same run (above 1 = faster)")
    print("| config | setup | ms back to back | ratio | ms after a pause | ratio | minor faults / step | "
          "kernel ms / step |")
    print("|---|---|--:|--:|--:|--:|--:|--:|")
    result = {}
    for (config, setup), ways in samples.items():
        ms = {w: med([x[0] for x in rows]) for w, rows in ways.items()}
        base = {w: med([x[0] for x in rows]) for w, rows in samples[(config, BASELINE)].items()}
        everything = ways["back_to_back"] + ways["paused"]
        faults, kernel = med([x[1] for x in everything]), med([x[2] for x in everything])
        print(f"| {config} | {setup} | {ms['back_to_back']:.1f} | {base['back_to_back'] / ms['back_to_back']:.2f} | "
              f"{ms['paused']:.1f} | {base['paused'] / ms['paused']:.2f} | {faults:.0f} | {kernel:.1f} |")
        result[f"{config}/{setup}"] = {"ms": ms, "minor_faults": faults, "kernel_ms": kernel}
    print(f"\nload after: {load_text()}; steal during the run: {window.steal_text()} of all CPU time")
    print("BENCH_HOST_ENV " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
