"""Default config: every section at its reference default. Override with --config.a.b=value."""
from hr1_jax.config import base_config


def get_config():
    return base_config()
