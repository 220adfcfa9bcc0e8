"""`hr1 serve` throughput and the served agent-SFT target's success beside the scripted target.

    .venv/bin/python benchmarks/bench_serve.py --workdir W [--tasks 0:20] [--repeats 3] [--guided_tools off]

W is an `hr1 agent-sft` workdir (W/final_params and W/rows/agent_sft_rows.jsonl), e.g. from
`hr1 baseline --config=agent_sft_demo --workdir=W && hr1 agent-sft --config=agent_sft_demo --workdir=W`.

1. Throughput: the first-turn prompts of the agent-SFT rows (DBBench system prompt, tool schema,
   task; the same 16 fixed prompts for every C and pass) sent over HTTP by C concurrent clients
   (C = 1, 4, 8; greedy, max_tokens 64), after two warm-up passes of each C (compiles excluded). The repeats are
   interleaved (C = 1, 4, 8, then again), so a change of machine load hits every C alike. Medians
   over repeats of requests/s and completion tokens/s; the ratio to C = 1 in the same run (named
   baseline: the same server decoding one request at a time), and the batch sizes that formed.
2. Success: the same task ids (test split) of each `--benchmarks` run by the scripted target the rows
   came from and by the served neural target (target.kind=openai), on one worker pool; success rate,
   mean reward, infra errors and mean turns of each, and the server's guided-tool-call counts.
The load average is printed before and after, with the steal share of all CPU time over the run.
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
from hr1_jax.serve.batcher import pow2_at_least  # noqa: E402
from hr1_jax.serve.openai_api import ServeOptions, parse_request  # noqa: E402
from hr1_jax.serve.server import ChatServer, load_sampler  # noqa: E402
from machine_state import CpuWindow, load_text  # noqa: E402  (benchmarks/, the script's folder)


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def _bodies(rows: list[dict], n: int, max_tokens: int) -> list[dict]:
    return [{"model": "bench", "messages": r["messages"][:2], "tools": r["tools"], "temperature": 0,
             "max_tokens": max_tokens} for r in (rows * n)[:n]]


def _pass(url: str, bodies: list[dict], concurrency: int) -> tuple[float, float]:
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        out = list(pool.map(lambda b: _post(url, b), bodies))
    dt = time.monotonic() - t0
    return len(out) / dt, sum(o["usage"]["completion_tokens"] for o in out) / dt


def throughput(srv, rows: list[dict], levels: tuple[int, ...], repeats: int, max_tokens: int) -> dict:
    same = _bodies(rows, 16, max_tokens)   # one fixed set of prompts for every C
    bodies = {c: same for c in levels}
    for _ in range(2):   # warm-up: compiles the batch shapes each concurrency forms (they vary with timing)
        for c in levels:
            _pass(srv.base_url, bodies[c], c)
    runs: dict[int, list] = {c: [] for c in levels}
    for _ in range(repeats):
        for c in levels:
            runs[c].append(_pass(srv.base_url, bodies[c], c))
    out = {c: {"requests_per_s": statistics.median(r[0] for r in runs[c]),
               "tokens_per_s": statistics.median(r[1] for r in runs[c]), "requests": len(bodies[c]),
               "passes_requests_per_s": [round(r[0], 2) for r in runs[c]]} for c in levels}
    for c in levels:
        out[c]["requests_per_s_vs_c1"] = out[c]["requests_per_s"] / out[levels[0]]["requests_per_s"]
        out[c]["tokens_per_s_vs_c1"] = out[c]["tokens_per_s"] / out[levels[0]]["tokens_per_s"]
    return out


def success(config, url: str, benchmarks: list[str], tasks: list[int]) -> dict:
    from hr1_jax.rollout.batches import run_batch, summarize
    from hr1_jax.rollout.pool import WorkerPool

    scripted = config.target.to_dict()
    neural = dict(scripted, kind="openai", base_url=url, model="bench", name="agent-sft-demo", temperature=0.0)
    out = {}
    with WorkerPool(config) as pool:
        for bench in benchmarks:
            for name, target in (("scripted", scripted), ("served_agent_sft", neural)):
                t0 = time.monotonic()
                eps = run_batch(pool, bench, "test", tasks, target=target, seed=0)
                s = summarize(bench, eps, config.rollout.reward_threshold)
                res = {k: s[k] for k in ("success_rate", "mean_reward", "infra_errors", "mean_turns")}
                out[f"{bench}/{name}"] = dict(res, wall_s=round(time.monotonic() - t0, 1))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tasks", default="0:20")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max_tokens", type=int, default=64)
    ap.add_argument("--skip_throughput", action="store_true", help="only the success comparison")
    ap.add_argument("--skip_success", action="store_true", help="only the throughput")
    ap.add_argument("--benchmarks", default="dbbench", help="comma-separated benchmarks of the success comparison")
    ap.add_argument("--guided_tools", choices=["on", "off"], default="on", help="as hr1 serve --guided_tools")
    args = ap.parse_args()
    from hr1_jax.config import parse_tasks

    print(f"load before: {load_text()}")
    window = CpuWindow()
    config = load_config(resolve_config("agent_sft_demo")[0], None)
    config.dbbench.backend = "sqlite"
    rows = read_jsonl(os.path.join(args.workdir, "rows", "agent_sft_rows.jsonl"))
    sampler, tok = load_sampler(os.path.join(args.workdir, "final_params"))
    opts = ServeOptions(model_id="bench")
    # one prompt bucket for every batch (the longest fixed prompt): batch width is the only shape that varies
    longest = max(len(parse_request(tok, b, opts).prompt_ids) for b in _bodies(rows, 16, args.max_tokens))
    with ChatServer(sampler, tok, opts, max_batch=8, window_s=0.01, min_prompt_bucket=pow2_at_least(longest, 64),
                    guided_tools=args.guided_tools == "on") as srv:
        result = {"guided_tools": args.guided_tools}
        if not args.skip_throughput:
            result["throughput"] = throughput(srv, rows, (1, 4, 8), args.repeats, args.max_tokens)
            print(f"load after throughput: {load_text()}")
        if not args.skip_success:
            result["success"] = success(config, srv.base_url, args.benchmarks.split(","), parse_tasks(args.tasks))
        result["server_stats"] = dict(srv.batcher.stats)
        result["guide_stats"] = dict(srv.batcher.guide.stats) if srv.batcher.guide else None
    print(json.dumps(result, indent=1))
    print(f"load after: {load_text()}; steal during the run: {window.steal_text()} of all CPU time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
