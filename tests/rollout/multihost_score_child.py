"""One JAX process of a 2-process CPU run for test_multihost_scoring: scores a group with
rollout.backend=ray and writes what it got (argv: process id, coordinator port, row json, out json)."""
import json
import os
import sys


def main() -> None:
    # Everything under main: the rollout pool's spawned workers re-import this file.
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    pid, port, row_path, out_path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=pid)
    from hr1_jax.config import base_config, validate_config
    from hr1_jax.rollout.identity import IdentityError
    from hr1_jax.rollout.pool import WorkerPool
    from hr1_jax.rollout.reward import RewardContext, score_group

    c = base_config()
    c.benchmark, c.dbbench.backend, c.rollout.backend = "dbbench", "sqlite", "ray"
    validate_config(c)
    with open(row_path) as f:
        spec = json.load(f)
    row, texts = spec["row"], spec["texts"]
    # Only process 0 may need rollout workers: any other process touching the pool is a failure.
    pool = WorkerPool(c, num_workers=1) if pid == 0 else None
    ctx = RewardContext(c, pool=pool, cache_dir=os.path.join(os.path.dirname(out_path), f"cache{pid}"))
    try:
        results = [r.to_dict() for r in score_group([row] * len(texts), texts, ctx)]
        tampered = json.loads(json.dumps(row))
        tampered["metadata"]["identity"]["batch_sha256"] = "0" * 64
        try:
            score_group([tampered], texts[:1], ctx)
            raised = ""
        except IdentityError as e:
            raised = type(e).__name__
        out = {"results": results, "evaluations": ctx.counters["evaluations"], "raised": raised,
               "pool_started": ctx._pool is not None}
    finally:
        if pool is not None:
            pool.close()
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
