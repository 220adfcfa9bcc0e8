import numpy as np
import pytest

from hr1_jax.eval.stats import paired_bootstrap_ci, paired_difference, summarize_pairs


def test_rescued_and_regressed_counts():
    s = summarize_pairs([0, 0, 1, 1, 0.5], [1, 0, 0, 1, 1.0])
    assert (s.rescued, s.regressed, s.n) == (2, 1, 5)
    assert s.mean_delta == pytest.approx((1 + 0 - 1 + 0 + 0.5) / 5)


def test_interval_contains_mean_and_flags_significance():
    rng = np.random.default_rng(1)
    clear_gain = rng.normal(0.3, 0.1, size=200)
    mean, lo, hi = paired_bootstrap_ci(clear_gain, seed=0)
    assert lo < mean < hi and lo > 0
    noisy = summarize_pairs(np.zeros(10), rng.choice([-1.0, 1.0], size=10))
    assert noisy.ci_low < 0 < noisy.ci_high and not noisy.significant


def test_bootstrap_is_reproducible_and_cluster_aware():
    d = np.array([1.0, 1.0, 1.0, -1.0, 0.0, 0.0])
    assert paired_bootstrap_ci(d, seed=3) == paired_bootstrap_ci(d, seed=3)
    # The same task repeated over seeds is one cluster: the interval is wider than if the
    # repeats counted as independent evidence.
    reps = np.repeat([1.0, 0.0, 0.0, 1.0, -1.0], 4)
    _, lo_iid, hi_iid = paired_bootstrap_ci(reps, seed=0)
    _, lo_cl, hi_cl = paired_bootstrap_ci(reps, seed=0, clusters=np.repeat(np.arange(5), 4))
    assert (hi_cl - lo_cl) > (hi_iid - lo_iid)


def test_unpaired_inputs_raise():
    with pytest.raises(ValueError, match="unpaired"):
        summarize_pairs([0, 1], [1])


def test_paired_difference_pairs_shared_keys_and_resamples_whole_tasks():
    # (benchmark, seed, task) keys: five tasks under four seeds, plus one key only the treated arm has
    gains = [1.0, 0.0, 0.0, 1.0, -1.0]
    control = {("db", seed, task): 0.0 for seed in range(4) for task in range(5)}
    treated = {key: gains[key[2]] for key in control} | {("db", 0, 9): 1.0}
    by_task = paired_difference(treated, control, cluster_of=lambda k: (k[0], k[2]), n_boot=500)
    by_key = paired_difference(treated, control, n_boot=500)
    assert by_task["n"] == 20 and by_task["mean"] == pytest.approx(0.2)
    # repeats of one task are one piece of evidence: the interval is wider than if they were independent
    assert by_task["ci95"][1] - by_task["ci95"][0] > by_key["ci95"][1] - by_key["ci95"][0]
    assert paired_difference({}, control) == {"mean": 0.0, "ci95": [0.0, 0.0], "n": 0}
