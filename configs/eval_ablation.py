"""The lifecycle-position ablation: every patch of `eval.engineer` is rerun four more times, once
with each hook site disabled (rows `w/o on_init`, `w/o make_pre_hint`, `w/o on_before_action`,
`w/o on_post_step`), each paired per task against the full patch. The reference: without
pre-action -3.9, post-feedback -3.3, init -0.9, pre-decision -0.6 pp Avg."""
from hr1_jax.eval.table_configs import table_config


def get_config():
    c = table_config()
    c.eval.ablation = True
    return c
