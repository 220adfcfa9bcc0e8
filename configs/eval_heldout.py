"""The held-out transfer table: per evidence seed, 10 sampled failures per benchmark -> one patch
per benchmark -> every other task of the split (the reference: 1,270 held-out tasks, 3 seeds,
Harness-R1 +8.92 +- 1.50 pp). Every engineer (`eval.engineer`, the frontier editors with endpoints)
writes its own held-out patch; the shipped held-out patches of the reference's three editors
(Harness-R1, Qwen3.5-397B, DeepSeek-V4-Pro; 3 seeds each) are scored as fixed rows beside them."""
from hr1_jax.eval.table_configs import add_frontier_editors, table_config
from hr1_jax.patch.reference import HELDOUT_EDITORS

SEEDS = ("seed20260720", "seed20260721", "seed20260722")


def get_config():
    c = table_config()
    e = c.eval
    e.heldout_evidence = 10
    e.heldout_seeds = "20260720,20260721,20260722"
    e.fixed_editors = ",".join(f"reference:{editor}/{seed}" for editor in HELDOUT_EDITORS for seed in SEEDS)
    add_frontier_editors(c)
    return c
