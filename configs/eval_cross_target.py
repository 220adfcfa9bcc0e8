"""The cross-target study: the same engineer against several frozen targets it was not trained on
(the reference: 20 unseen targets, +7.06 pp Avg). Each target is a full evaluation under
W/targets/<key>; W/cross_target.md and .csv give each target's baseline Avg and every method's
change, and the mean over targets.

Targets: HR1_CROSS_TARGETS="key=model@base_url,key2=model2@base_url2" (API key variable:
HR1_TARGET_API_KEY_ENV, default OPENAI_API_KEY). Unset: two scripted targets of different skill,
so the config runs anywhere."""
import os

from hr1_jax.eval.table_configs import table_config


def _targets(spec: str) -> dict:
    out = {}
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        key, _, rest = part.partition("=")
        model, _, url = rest.partition("@")
        if not (key and model and url):
            raise ValueError(f"HR1_CROSS_TARGETS: expected key=model@base_url, got {part!r}")
        out[key] = dict(kind="openai", name=model, model=model, base_url=url,
                        api_key_env=os.environ.get("HR1_TARGET_API_KEY_ENV", "OPENAI_API_KEY"))
    return out


def get_config():
    c = table_config()
    targets = _targets(os.environ.get("HR1_CROSS_TARGETS", "")) or {
        "scripted_weak": dict(kind="scripted", name="scripted-weak", scripted=dict(skill=0.4, hint_follow_prob=0.7)),
        "scripted_strong": dict(kind="scripted", name="scripted-strong", scripted=dict(skill=0.8, hint_follow_prob=0.7)),
    }
    for key, target in targets.items():
        c.eval.targets[key] = target
    return c
