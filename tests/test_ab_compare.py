"""benchmarks/ab_compare.py: the swap that builds the baseline variant, the comparison's check and
figures, and the shape arguments (no timing is asserted)."""
import sys
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import ab_compare  # noqa: E402


def test_traced_with_swaps_only_while_the_call_runs_even_when_it_raises():
    mod = types.SimpleNamespace(f=lambda x: x + 1)
    own = mod.f
    seen = []
    swapped = ab_compare.traced_with(mod, "f", lambda x: x * 10, lambda x: seen.append(mod.f(x)) or mod.f(x))
    assert swapped(3) == 30 and seen == [30] and mod.f is own

    def boom(x):
        raise ValueError(mod.f(x))
    with pytest.raises(ValueError, match="30"):
        ab_compare.traced_with(mod, "f", lambda x: x * 10, boom)(3)
    assert mod.f is own


def test_a_jitted_variant_keeps_the_function_it_was_traced_with():
    mod = types.SimpleNamespace(core=lambda x: x + 1.0)
    own = mod.core
    fns = {"base": ab_compare.traced_with(mod, "core", lambda x: x * 2.0, jax.jit(lambda x: mod.core(x))),
           "ours": ab_compare.traced_with(mod, "core", own, jax.jit(lambda x: mod.core(x)))}
    out = ab_compare.compare(fns, (jnp.float32(3.0),), 3, baseline="base")
    assert out["max_abs_diff"] == pytest.approx(2.0)       # |6 - 4|: each variant kept its own trace
    assert out["base_ms"] > 0 and out["ours_ms"] > 0
    assert out["ratio"] == pytest.approx(out["base_ms"] / out["ours_ms"]) and out["ratio_pairwise"] > 0
    assert {"load", "steal"} <= set(out)


def test_shape_arguments_are_checked():
    args = ab_compare.parse_shape_args("d", {"tiny": 1, "demo": 2}, ["--shapes", "tiny,demo", "--repeats", "3"])
    assert args.shapes == ["tiny", "demo"] and args.repeats == 3 and args.batch == 8
    for bad in (["--shapes", "huge"], ["--batch", "0"], ["--seq", "1"], ["--repeats", "0"]):
        with pytest.raises(SystemExit):
            ab_compare.parse_shape_args("d", {"tiny": 1}, bad)
