"""GRPO refuses rows it cannot use with one line naming the key (an InputError: `hr1` prints it
without a traceback), not a ValueError traceback."""
import pytest

from hr1_jax.errors import InputError
from hr1_jax.train.grpo import GRPOTrainer
from tests.train.test_learning import _config, _rows


def test_no_row_fitting_max_prompt_tokens_is_an_input_error(tmp_path):
    c = _config()
    c.mesh.data = -1          # whatever devices the process has (the suite fakes 8)
    c.train.grpo.max_prompt_tokens = 4
    with pytest.raises(InputError, match=r"train\.grpo\.max_prompt_tokens=4: the shortest of 3 prompts has \d+ tokens"):
        GRPOTrainer(c, str(tmp_path), rows=_rows("train", 3))


def test_update_scores_its_anchors_under_the_mesh(tmp_path):
    """The pre-update and reference log-prob passes run under the trainer's mesh, as its step does, so
    a per-device kernel (splash attention's shard_map) finds the mesh there too."""
    import jax

    from hr1_jax.train.grpo import Sample

    c = _config()
    c.mesh.data = -1                 # whatever devices the process has (the suite fakes 8)
    c.train.grpo.kl_coef = 0.01      # the reference pass runs too
    n = jax.device_count()
    c.train.grpo.update(dict(global_batch=2 * n, micro_batch=n, iterations=1))
    trainer = GRPOTrainer(c, str(tmp_path), rows=_rows("train", 3))
    seen = []
    score = trainer.logp_fn

    def spy(params, ids, mask):
        seen.append(dict(zip(jax.sharding.get_abstract_mesh().axis_names, jax.sharding.get_abstract_mesh().axis_sizes)))
        return score(params, ids, mask)

    trainer.logp_fn = spy
    row = trainer.rows[0]
    samples = [Sample(row=row, prompt=[5, 6, 7], response=[8, 9], sampler_logp=[-1.0, -1.0], text="x", group=0,
                      reward=float(i % 2), valid=True, advantage=1.0 - 2 * (i % 2)) for i in range(2 * n)]
    trainer._update(samples, 0)
    assert seen == [{"data": n, "fsdp": 1, "tensor": 1}] * 4   # 2 micro-batches x (anchor, reference)
