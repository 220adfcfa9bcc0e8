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
