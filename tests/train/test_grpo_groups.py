"""GRPO sample bookkeeping: advantages per prompt group with eval_failed samples excluded, the
dynamic-sampling keep rule, and the right-padded training layout of prompt + response."""
import numpy as np

from hr1_jax.train.grpo import Sample, assign_advantages, collate, informative


def _s(group, reward, valid=True, prompt=(5, 6, 7), response=(8, 9)):
    return Sample(row={}, prompt=list(prompt), response=list(response), sampler_logp=[-0.5] * len(response),
                  text="", group=group, reward=reward if valid else None, valid=valid)


def test_advantages_per_group_and_eval_failed_excluded():
    samples = [_s(0, 1.0), _s(0, 0.0), _s(0, 50.0, valid=False), _s(1, 0.3), _s(1, 0.3)]
    groups = assign_advantages(samples, std_normalize=False)
    assert [len(g) for g in groups] == [3, 2]
    assert [round(s.advantage, 6) for s in samples[:3]] == [0.5, -0.5, 0.0]
    assert samples[3].advantage == samples[4].advantage == 0.0      # zero-variance group
    assert not informative(groups[0])   # a member's evaluation failed
    assert not informative(groups[1])   # no spread
    assert informative([_s(2, 0.0), _s(2, 0.1)])


def test_collate_masks_only_response_targets():
    s = _s(0, 1.0)
    s.advantage = 2.0
    b = collate([s, None], 8, pad_id=0)
    assert b["input_ids"][0].tolist() == [5, 6, 7, 8, 9, 0, 0, 0]
    assert b["attention_mask"][0].tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
    # targets at positions 2, 3 are tokens 8 and 9 (the response)
    assert b["loss_mask"][0].tolist() == [0, 0, 1, 1, 0, 0, 0]
    np.testing.assert_allclose(b["sampler_logp"][0, 2:4], [-0.5, -0.5])
    assert b["advantages"].tolist() == [2.0, 0.0] and b["loss_mask"][1].sum() == 0
