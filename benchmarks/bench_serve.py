"""`hr1 serve` throughput and the served agent-SFT target's success beside the scripted target.

    .venv/bin/python benchmarks/bench_serve.py --workdir W [--tasks 0:20] [--repeats 3]

W is an `hr1 agent-sft` workdir (W/final_params and W/rows/agent_sft_rows.jsonl), e.g. from
`hr1 baseline --config=agent_sft_demo --workdir=W && hr1 agent-sft --config=agent_sft_demo --workdir=W`.

1. Throughput: the first-turn prompts of the agent-SFT rows (DBBench system prompt, tool schema,
   task) sent over HTTP by C concurrent clients (C = 1, 4, 8; greedy, max_tokens 64), after one
   warm-up pass of each C (compiles excluded). Medians over repeats of requests/s and completion
   tokens/s; the ratio to C = 1 (named baseline: the same server decoding one request at a time).
2. Success: the same DBBench task ids (test split) run by the scripted target the rows came from and
   by the served neural target (target.kind=openai), on one worker pool; success rate, mean reward,
   infra errors and mean turns of each.
The load average is printed before and after.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hr1_jax.config_files import load_config, resolve_config  # noqa: E402
from hr1_jax.data.rows import read_jsonl  # noqa: E402
from hr1_jax.serve.openai_api import ServeOptions  # noqa: E402
from hr1_jax.serve.server import ChatServer, load_sampler  # noqa: E402


def _load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def throughput(url: str, rows: list[dict], concurrency: int, repeats: int, max_tokens: int) -> dict:
    bodies = [{"model": "bench", "messages": r["messages"][:2], "tools": r["tools"], "temperature": 0,
               "max_tokens": max_tokens} for r in rows[:max(concurrency * 2, 8)]]

    def one_pass():
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            out = list(pool.map(lambda b: _post(url, b), bodies))
        dt = time.monotonic() - t0
        return len(out) / dt, sum(o["usage"]["completion_tokens"] for o in out) / dt

    one_pass()   # warm-up: compiles every batch shape this concurrency produces
    runs = [one_pass() for _ in range(repeats)]
    return {"requests_per_s": statistics.median(r[0] for r in runs),
            "tokens_per_s": statistics.median(r[1] for r in runs), "requests": len(bodies)}


def success(config, url: str, tasks: list[int]) -> dict:
    from hr1_jax.rollout.batches import run_batch, summarize
    from hr1_jax.rollout.pool import WorkerPool

    scripted = config.target.to_dict()
    neural = dict(scripted, kind="openai", base_url=url, model="bench", name="agent-sft-demo", temperature=0.0)
    out = {}
    with WorkerPool(config) as pool:
        for name, target in (("scripted", scripted), ("served_agent_sft", neural)):
            t0 = time.monotonic()
            eps = run_batch(pool, "dbbench", "test", tasks, target=target, seed=0)
            s = summarize("dbbench", eps, config.rollout.reward_threshold)
            out[name] = {k: s[k] for k in ("success_rate", "mean_reward", "infra_errors", "mean_turns")}
            out[name]["wall_s"] = round(time.monotonic() - t0, 1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tasks", default="0:20")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max_tokens", type=int, default=64)
    ap.add_argument("--skip_throughput", action="store_true", help="only the success comparison")
    args = ap.parse_args()
    from hr1_jax.config import parse_tasks

    print(f"load before: {_load()}")
    config = load_config(resolve_config("agent_sft_demo")[0], None)
    config.dbbench.backend = "sqlite"
    rows = read_jsonl(os.path.join(args.workdir, "rows", "agent_sft_rows.jsonl"))
    sampler, tok = load_sampler(os.path.join(args.workdir, "final_params"))
    with ChatServer(sampler, tok, ServeOptions(model_id="bench"), max_batch=8, window_s=0.01) as srv:
        result = {}
        if not args.skip_throughput:
            result["throughput"] = {c: throughput(srv.base_url, rows, c, args.repeats, args.max_tokens)
                                    for c in (1, 4, 8)}
            for r in result["throughput"].values():
                r["requests_per_s_vs_c1"] = r["requests_per_s"] / result["throughput"][1]["requests_per_s"]
        result["success"] = success(config, srv.base_url, parse_tasks(args.tasks))
        result["server_stats"] = dict(srv.batcher.stats)
    print(json.dumps(result, indent=1))
    print(f"load after: {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
