"""ALFWorld's descriptor: the real TextWorld games, reported per task family (the paper's columns)."""
from __future__ import annotations

from envs.alfworld.patch_spec import PATCH
from envs.plugin import Benchmark, DemoTasks, Packets, ReportColumns

# task families in the paper's column order, with their short main-table headers
FAMILIES = (("pick_and_place", "ALF Pick"), ("look_at_obj", "ALF Look"), ("pick_clean_then_place", "ALF Clean"),
            ("pick_heat_then_place", "ALF Heat"), ("pick_cool_then_place", "ALF Cool"), ("pick_two_obj", "ALF Pick2"))


def family_of(episode: dict) -> str:
    """The task family of an episode, from its game path ("" when it has none)."""
    game = (episode.get("identity") or {}).get("game", "")
    if not game:
        return ""
    from envs.alfworld.tasks import family_of_path
    return family_of_path(game)


BENCHMARK = Benchmark(
    name="alfworld",
    env="envs.alfworld.env:ALFWorldEnv",
    scripted_agent="envs.alfworld.scripted:ScriptedAgent",
    config_section="envs.alfworld.config",
    test_split="harness_r1_test",
    report=ReportColumns(title="ALFWorld", success="ALFWorld (all)", ablation="ALFWorld", families=FAMILIES),
    data_source=lambda section, recorded: "ALFWorld: the real TextWorld games (ALFWorld 0.4.0 files)",
    family_of=family_of,
    eval_notes=("ALFWorld test split: 432 of the 500 Harness-R1 test games are available",),
    rank=1,
    teacher_signals="envs.alfworld.teacher_signals:SIGNALS",
    demo=DemoTasks(train_split="train", train_tasks="0:15", heldout_split="dev", heldout_tasks="0:10",
                   val_split="train"),
    patch=PATCH,
    packets=Packets(title="ALFWorld", also_forbid="numbered instance ids such as \"sinkbasin 1\"",
                    limits=(("max_obs_chars", 350), ("max_assistant_chars", 200), ("max_approx_tokens", 12000))),
    shuffle_offset=101,
)
