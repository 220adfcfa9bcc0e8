"""Config section `alfworld` (reference spec §4.2, environments.md §1)."""
import ml_collections

from hr1_jax.utils.config_errors import require


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.max_steps = 50               # Harness-R1 runs (AgentBench's default is 20)
    c.data_dir = ""                # "" = $HR1_ALFWORLD_DATA or the project's unpacked copy
    # Show AgentBench's 0.2.2 `put O in/on R` surface over the 0.4.0 engine's `move O to R`
    # (envs/alfworld/actions.py); False = the engine's own wording.
    c.put_surface = True
    # Minimum BLEU-1 score for snapping free text to an admissible command (actions.py).
    c.match_threshold = 0.5
    return c


def validate(c, config) -> None:
    require(c.max_steps >= 1, "alfworld.max_steps", "must be >= 1")
    require(0.0 <= c.match_threshold <= 1.0, "alfworld.match_threshold", "must be in [0, 1]")
