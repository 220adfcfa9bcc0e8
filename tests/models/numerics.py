"""Tolerances that follow from the arithmetic, not from one machine's rounding.

Two runs of one computation that differ only in shapes (padding, cache vs full forward), sharding or
the host's vector width differ only in how XLA orders each reduction. A length-n sum in any order
is within gamma_n * sum|terms| of the exact value, gamma_n ~= n * u with unit roundoff u = eps / 2
(Higham, "Accuracy and Stability of Numerical Algorithms", section 3.1), so the two runs differ by
at most n * eps * sum|terms|.
"""
import functools

import jax.numpy as jnp

_PROBE = 16


@functools.cache
def dot_eps() -> float:
    """Spacing of numbers near 1 in fp32 dots as this backend runs them: fp32 on CPU, but JAX's
    default matmul precision rounds fp32 inputs to TF32 on recent GPUs and to bf16 on TPUs."""
    eye = jnp.eye(_PROBE, dtype=jnp.float32)
    for mantissa_bits in (23, 10, 7):  # fp32, tf32, bf16
        eps = 2.0 ** -mantissa_bits
        if float(jnp.dot(jnp.full((_PROBE, _PROBE), 1 + eps, jnp.float32), eye)[0, 0]) == 1 + eps:
            return eps
    raise AssertionError("fp32 dots keep fewer mantissa bits than bf16")


def reorder_tol(terms_scale: float, n: int) -> float:
    """Bound on |run_a - run_b| for length-n reductions whose terms' absolute values sum to at most
    `terms_scale`, when the two runs order the reductions differently."""
    return n * dot_eps() * float(terms_scale)
