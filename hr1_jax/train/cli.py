"""`hr1 sft` and `hr1 grpo` stages (config stages: fn(config, workdir) -> exit code)."""
from __future__ import annotations

import json
import os

from hr1_jax.utils.logging import log_event


def sft_stage(config, workdir: str) -> int:
    from hr1_jax.train.sft import run_sft

    summary = run_sft(config, workdir)
    with open(os.path.join(workdir, "sft_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    return 0


def grpo_stage(config, workdir: str) -> int:
    from hr1_jax.train.grpo import GRPOTrainer

    trainer = GRPOTrainer(config, workdir)
    out = trainer.run()
    last = out["history"][-1] if out["history"] else {}
    summary = {"steps": out["steps"], "last": last}
    with open(os.path.join(workdir, "grpo_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    log_event("grpo", "done", steps=out["steps"])
    print(json.dumps(summary, indent=1))
    return 0
