"""The paper's main table: `hr1 eval --config=configs/eval_main.py --config.eval.engineer=RUN/grpo
--workdir=W` -> W/report.md, W/main_table.csv (ALFWorld families + All, WebShop score/success,
DBBench, Avg; n per cell). Rows: no patch, the engineer, the template teacher, the frontier editors
whose endpoints are set (configs/eval_common.py), the Self-Refine rule and the budget-matched
best-of-N target. Per benchmark instead: `--config.eval.benchmarks=dbbench --workdir=W_db`, ...,
then `--config.eval.merge_from=W_alf,W_ws,W_db --workdir=W`."""
from hr1_jax.eval.table_configs import add_frontier_editors, table_config


def get_config():
    c = table_config()
    e = c.eval
    e.compare_teacher = True
    e.self_refine = True
    e.best_of_n = True
    add_frontier_editors(c)
    return c
