"""Per-benchmark task specs of `hr1 eval`: `eval.tasks` is one spec for every benchmark
(`--config.eval.tasks=all`, `=0:50`, `=3,5,9`) with per-benchmark overrides
(`--config.eval.tasks.dbbench=0:50`). `all` is the benchmark's whole split (ALFWorld test 432,
WebShop test 500, DBBench test 300); an id outside the split is refused at start-up, before any
episode runs (it would otherwise surface as infrastructure errors)."""
from __future__ import annotations

import ml_collections
from absl import flags
from ml_collections.config_flags import config_flags

from envs.registry import names
from hr1_jax.config import ConfigError, parse_tasks

ALL = "all"


class TaskSpecs(ml_collections.ConfigDict):
    """`default` plus one key per benchmark ("" = the default). A plain string sets the default
    and clears the overrides, on the command line (`--config.eval.tasks=all`) and in Python
    (`c.eval.tasks.update("0:10")`, `c.eval.update(dict(tasks="0:10"))`)."""

    @classmethod
    def of(cls, default: str = "0:20", **per_benchmark: str) -> "TaskSpecs":
        unknown = sorted(set(per_benchmark) - set(names()))
        if unknown:
            raise ConfigError("eval.tasks", f"unknown benchmarks {unknown}; known: {list(names())}")
        return cls({"default": str(default), **{b: str(per_benchmark.get(b, "")) for b in names()}})

    def update(self, *other, **kwargs):
        if len(other) == 1 and isinstance(other[0], str):
            other = (TaskSpecs.of(other[0]).to_dict(),)
        return super().update(*other, **kwargs)

    def spec(self, benchmark: str) -> str:
        return str(self.get(benchmark) or self.default)


class _TaskSpecsParser(flags.ArgumentParser):
    def parse(self, argument):
        return argument if isinstance(argument, TaskSpecs) else TaskSpecs.of(str(argument))

    def flag_type(self):
        return "task spec"


config_flags.register_flag_parser_for_type(TaskSpecs, _TaskSpecsParser())


def spec_for(tasks, benchmark: str) -> str:
    """The spec of one benchmark from `eval.tasks` (a TaskSpecs, its dict form, or a string)."""
    if isinstance(tasks, str):
        return tasks
    return str(tasks.get(benchmark) or tasks.get("default") or "")


def resolve_ids(spec: str, n_tasks: int, key: str) -> list[int]:
    """The task ids of `spec` in a split of `n_tasks`; out-of-range ids are a ConfigError."""
    if str(spec).strip() == ALL:
        return list(range(n_tasks))
    ids = parse_tasks(spec)
    bad = [i for i in ids if not 0 <= i < n_tasks]
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
        raise ConfigError(key, f"{spec!r} names task ids outside the split ({n_tasks} tasks, ids 0..{n_tasks - 1}): "
                               f"{shown}; use 'all' for the whole split")
    return ids


def split_size(config, benchmark: str, split: str) -> int:
    from envs.registry import make_env
    try:
        return len(make_env(benchmark, config).tasks(split))
    except (KeyError, ValueError) as e:   # an unknown split name
        raise ConfigError(f"eval.split.{benchmark}", str(e).strip("'\"")) from None


def resolve_all(config, benchmarks: list[str]) -> dict[str, str]:
    """{benchmark: a concrete 'i,j,k' or 'start:end' spec}, every id checked against its split."""
    out = {}
    for bench in benchmarks:
        split = config.eval.split[bench]
        spec = spec_for(config.eval.tasks, bench)
        ids = resolve_ids(spec, split_size(config, bench, split), f"eval.tasks.{bench}")
        contiguous = ids == list(range(ids[0], ids[0] + len(ids)))
        out[bench] = f"{ids[0]}:{ids[-1] + 1}" if contiguous else ",".join(map(str, ids))
    return out
