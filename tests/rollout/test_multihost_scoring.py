"""rollout.backend=ray in a 2-process JAX run (CPU, gloo): process 0 scores the group once, every
process gets the same results, and an IdentityError on process 0 is raised on both."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from hr1_jax.config import base_config, validate_config
from hr1_jax.rollout.batches import baseline_metadata, run_batch
from hr1_jax.rollout.pool import WorkerPool

CHILD = Path(__file__).with_name("multihost_score_child.py")
HINT = ("def hook(ctx, nb):\n    if ctx['predicates']['no_sql_yet'] and not nb.get('hinted'):\n"
        "        nb['hinted'] = True\n        return {'message': 'Run DESCRIBE on the table first.'}\n"
        "    return None\n")


def test_process_zero_scores_once_and_every_process_gets_its_results(tmp_path):
    c = base_config()
    c.benchmark, c.dbbench.backend = "dbbench", "sqlite"
    validate_config(c)
    with WorkerPool(c, num_workers=1) as pool:
        eps = run_batch(pool, "dbbench", "test", [0, 1, 2, 3], target=c.target.to_dict(), seed=0)
    row = {"prompt": [], "label": "", "metadata": baseline_metadata("dbbench", "test", 0, eps,
                                                                    target_name=c.target.name)}
    patch = {"benchmark": "dbbench", "description": "schema hint",
             "actions": [{"type": "add_code_hook", "hook": "make_pre_hint", "code": HINT}]}
    texts = [f"- guessed names\n</think>\n<patch>{json.dumps(patch)}</patch>"] * 2 + ["no patch"]
    (tmp_path / "row.json").write_text(json.dumps({"row": row, "texts": texts}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}   # one CPU device per process
    logs = [open(tmp_path / f"log{i}.txt", "w") for i in range(2)]
    procs = [subprocess.Popen([sys.executable, str(CHILD), str(i), port, str(tmp_path / "row.json"),
                               str(tmp_path / f"out{i}.json")], env=env, stdout=logs[i],
                              stderr=subprocess.STDOUT) for i in range(2)]
    try:
        codes = [p.wait(timeout=240) for p in procs]
    finally:
        for p in procs:
            p.kill()
        for f in logs:
            f.close()
    tails = "\n".join((tmp_path / f"log{i}.txt").read_text(errors="replace")[-3000:] for i in range(2))
    assert codes == [0, 0], tails
    zero, one = (json.loads((tmp_path / f"out{i}.json").read_text()) for i in range(2))
    assert zero["results"] == one["results"]
    assert [r["eval_status"] for r in zero["results"]] == ["ok", "ok", "invalid_patch"]
    assert (zero["evaluations"], one["evaluations"]) == (1, 0)          # scored once, on process 0
    assert (zero["pool_started"], one["pool_started"]) == (True, False)  # process 1 ran no rollouts
    assert zero["raised"] == one["raised"] == "IdentityError"
