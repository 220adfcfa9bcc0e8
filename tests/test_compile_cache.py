"""The `compile_cache` section: which folder a stage's JAX compilation cache uses, that a later
compile of the same program in a fresh jit is loaded from it (JAX's cache-hit event, not timing),
that the process's setting comes back after the stage, and that `hr1` stages run inside it. JAX opens
its cache once per process, so everything that compiles runs in a fresh subprocess."""
import json
import os
import subprocess
import sys
import textwrap

import ml_collections
import pytest

from hr1_jax.config import ConfigError, base_config, validate_config
from hr1_jax.utils.compile_cache import defaults, resolve_dir, stage_cache, validate

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code: str, env_extra: dict | None = None) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=REPO)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env.update(env_extra or {})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_resolve_dir(tmp_path):
    c = defaults()
    assert c.dir == "auto"
    assert resolve_dir(c, str(tmp_path), None) == str(tmp_path / "xla_cache")
    assert resolve_dir(c, str(tmp_path), "/shared/jax") == "/shared/jax"   # $JAX_COMPILATION_CACHE_DIR wins
    c.dir = ""
    assert resolve_dir(c, str(tmp_path), "/shared/jax") is None
    c.dir = "/elsewhere"
    assert resolve_dir(c, str(tmp_path), "/shared/jax") == "/elsewhere"


def test_bad_values_name_the_key():
    c = base_config()
    c.compile_cache.min_compile_seconds = -1.0
    with pytest.raises(ConfigError, match="compile_cache.min_compile_seconds"):
        validate_config(c)
    section = ml_collections.ConfigDict(dict(dir=3, min_compile_seconds=1.0))   # a config file's own section
    with pytest.raises(ConfigError, match="compile_cache.dir"):
        validate(section, c)


# One program jitted afresh in each stage: a new closure each time, so JAX's in-memory cache cannot
# serve it and only the persistent cache can.
STAGES_SCRIPT = """
    import json, os, sys
    import jax, jax.numpy as jnp
    from jax import monitoring
    from hr1_jax.utils.compile_cache import defaults, stage_cache

    hits = []
    monitoring.register_event_listener(
        lambda name, **kw: hits.append(name) if name == "/jax/compilation_cache/cache_hits" else None)

    def fresh_program():
        return jax.jit(lambda x: jnp.tanh(x @ x.T).sum() * 3.0)

    c = defaults()
    c.min_compile_seconds = 0.0
    out = []
    for workdir in sys.argv[1:]:
        before = len(hits)
        with stage_cache(c, workdir) as path:
            inside = jax.config.jax_compilation_cache_dir
            value = float(fresh_program()(jnp.ones((16, 16))))
        out.append(dict(path=path, inside=inside, hit=len(hits) > before, value=value,
                        after=jax.config.jax_compilation_cache_dir,
                        entries=len(os.listdir(path)) if path and os.path.isdir(path) else 0))
    print(json.dumps(out))
"""


def test_a_later_stage_loads_the_executable_and_the_setting_comes_back(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    code = STAGES_SCRIPT.replace("sys.argv[1:]", repr([a, a, b]))
    first, again, other = run_python(code)
    assert first["path"] == first["inside"] == os.path.join(a, "xla_cache")
    assert first["entries"] >= 1 and not first["hit"]
    assert again["hit"] and again["value"] == first["value"]   # same executable, same result
    # a stage with another workdir opens its own folder (JAX's once-per-process cache was reset)
    assert other["path"] == os.path.join(b, "xla_cache") and not other["hit"] and other["entries"] >= 1
    assert first["after"] is None and again["after"] is None and other["after"] is None


def test_auto_keeps_the_environments_folder(tmp_path):
    shared = str(tmp_path / "shared")
    code = STAGES_SCRIPT.replace("sys.argv[1:]", repr([str(tmp_path / "w")]))
    (only,) = run_python(code, {"JAX_COMPILATION_CACHE_DIR": shared})
    assert only["path"] == only["inside"] == only["after"] == shared and only["entries"] >= 1
    assert not os.path.exists(tmp_path / "w" / "xla_cache")


def stage_sees(stage: str, *args: str) -> dict:
    """JAX's cache folder while `hr1 <stage>`'s function runs (through `_run_config_stage`, as the CLI
    runs it; a stand-in function, one stage per process as absl's flags need), and after it."""
    code = f"""
        import json
        import jax
        from hr1_jax import cli

        seen = {{}}
        def record(config, workdir):
            seen["inside"] = jax.config.jax_compilation_cache_dir
            return 0
        cli._run_config_stage({stage!r}, cli.STAGES[{stage!r}], record, {list(args)!r})
        print(json.dumps(dict(seen, after=jax.config.jax_compilation_cache_dir)))
    """
    return run_python(code)


def test_hr1_stages_run_inside_the_cache(tmp_path):
    """A compiling stage runs in its section's folder; a stage that reads no engineer config does
    not; "" switches the cache off."""
    assert stage_sees("sft", f"--workdir={tmp_path}/sft") == dict(inside=f"{tmp_path}/sft/xla_cache", after=None)
    assert stage_sees("rollout", f"--workdir={tmp_path}/r") == dict(inside=None, after=None)
    assert stage_sees("sft", f"--workdir={tmp_path}/sft", "--config.compile_cache.dir=")["inside"] is None


def test_a_folder_that_cannot_be_made_is_a_config_error(tmp_path):
    """JAX itself would only warn at every compile; the stage stops first, naming the key."""
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    c = defaults()
    c.dir = str(blocker / "cache")
    with pytest.raises(ConfigError, match="compile_cache.dir: cannot create the cache folder"):
        with stage_cache(c, str(tmp_path)):
            pass
