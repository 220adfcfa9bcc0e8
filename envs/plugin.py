"""What a benchmark provides beyond its Environment: one `Benchmark` descriptor per benchmark folder
(`envs/<name>/plugin.py` exports it as `BENCHMARK`), listed by name in `envs/registry.py`.

Code outside envs/ asks the descriptor (through the registry) instead of naming a benchmark: which
Environment and scripted target to build, which test split an evaluation uses, how its results are
reported (main-table columns, footnote, task families) and where its data comes from. The
descriptor is cheap to import: heavy parts (the environment, the scripted target) are "module:attr"
paths the registry imports on use. docs/adding-a-benchmark.md walks through a new one.
"""
from __future__ import annotations

import dataclasses
from typing import Callable


def _no_family(episode: dict) -> str:
    return ""


def _no_note(source: str) -> str:
    return ""


@dataclasses.dataclass(frozen=True)
class ReportColumns:
    """How the evaluation report shows a benchmark. Main-table columns, in order: one per task
    family (`families`), a mean-reward column when `score` is set, then the success column."""
    title: str                                  # display name, e.g. "WebShop"
    success: str                                # main-table header of the success-rate column
    ablation: str                               # ablation-table header (success change)
    score: str = ""                             # header of a mean reward × 100 column; "" = none
    families: tuple[tuple[str, str], ...] = ()  # (family, main-table header) per task family
    mark: str = ""                              # footnote mark its headers carry
    # The main table's footnote for this benchmark, from its data-source line ("" = none).
    footnote: Callable[[str], str] = _no_note

    @property
    def label(self) -> str:
        """Its name in delta tables and plots (with its mark)."""
        return self.title + self.mark


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """One benchmark's plug-in. `name` is its registry key, its config section and `Task.benchmark`."""
    name: str
    env: str                          # "module:Class" of its envs.base.Environment
    scripted_agent: str               # "module:Class" of its seeded scripted target (task, seed, config)
    test_split: str                   # the split evaluations use by default
    report: ReportColumns
    # (its config section as a dict, recorded(key) -> the values of final[key] its results
    # recorded) -> the report's line naming its data.
    data_source: Callable[[dict, Callable[[str], list[str]]], str]
    config_section: str = ""          # module with its config section's defaults() / validate(); "" = none
    family_of: Callable[[dict], str] = _no_family   # an episode's task family ("" = none)
    eval_notes: tuple[str, ...] = ()                # lines every evaluation report carries
