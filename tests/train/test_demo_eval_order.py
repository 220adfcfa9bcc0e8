"""The demo table's means do not depend on the process: the same held-out outcomes give the same
numbers to the last bit under every string-hash seed (a set of (benchmark, seed, task) keys iterates
in a per-process order, and a float sum depends on its order)."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import json, types
import numpy as np
from hr1_jax.train.demo_eval import Outcomes

rng = np.random.default_rng(0)
def run():
    pairs = [types.SimpleNamespace(benchmark=b, seed=s, task_id=t, baseline_reward=float(rng.random()),
                                   patched_reward=float(rng.random()))
             for b in ("alfworld", "dbbench", "webshop") for s in (0, 1) for t in range(20)]
    return types.SimpleNamespace(pairs=pairs, patches=[types.SimpleNamespace(valid=True)] * 6, n_eval_failed=0)
out = Outcomes(tau=0.5, n_rows=6)
base = run()
for method in ("sft", "grpo", "grpo"):
    r = run()
    for p, b in zip(r.pairs, base.pairs):   # one baseline per task, as the real runs share it
        p.baseline_reward = b.baseline_reward
    out.add(method, r)
print(json.dumps({m: {k: repr(v) for k, v in out.entry(m).items()} for m in ("sft", "grpo")}))
"""


def test_table_means_are_the_same_under_every_hash_seed():
    outputs = set()
    for seed in range(6):
        env = dict(os.environ, PYTHONHASHSEED=str(seed), PYTHONPATH=REPO, JAX_PLATFORMS="cpu")
        r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        outputs.add(r.stdout.strip())
    assert len(outputs) == 1, outputs
    assert set(json.loads(outputs.pop())["grpo"]) == {"mean_delta_reward", "delta_pass_rate", "valid_rate",
                                                       "n_batches"}
