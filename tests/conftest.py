"""Shared pytest set-up: CPU-only JAX with a persistent compile cache, repo paths."""
import os
import pathlib

# Tests run on CPU; 8 simulated devices let sharding tests build real meshes. Must be set before
# jax is imported anywhere.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("HR1_PROGRESS", "0")
os.environ.setdefault("HR1_LOG_FORMAT", "json")   # tests read the machine form of the event lines

REPO = pathlib.Path(__file__).resolve().parents[1]
_cache = os.environ.get("HR1_JAX_CACHE_DIR", str(REPO / ".cache" / "jax"))
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _cache)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")
