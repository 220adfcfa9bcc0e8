"""Config section `eval`: fixed-batch run-patch-rerun evaluation, baselines, held-out transfer, reports."""
import ml_collections

from hr1_jax.config import BENCHMARKS, require


def defaults() -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    # Patch source under test: a checkpoint folder, an http(s):// endpoint (+ engineer_model),
    # "teacher", "reference:<seed dir>", or "" (baselines only).
    c.engineer = ""
    c.engineer_model = ""
    c.engineer_name = ""               # display name ("" = derived)
    c.max_new_tokens = 12288
    c.compare_teacher = True           # add the template teacher as a method
    c.fixed_editors = "reference:seed20260720"  # comma-separated extra fixed patch sources
    c.benchmarks = "alfworld,webshop,dbbench"
    # Test split per benchmark (ALFWorld: the 432 available Harness-R1 test games).
    c.split = ml_collections.ConfigDict({"alfworld": "harness_r1_test", "webshop": "test", "dbbench": "test"})
    c.tasks = "0:20"                   # per benchmark
    c.seeds = "0,1"                    # target seeds: each has its own baseline and reruns
    c.self_refine = True
    c.best_of_n = True
    c.best_of_n_temperature = 0.7      # for endpoint targets (distinct attempts need sampling)
    c.heldout_evidence = 10            # failures per benchmark for held-out transfer; 0 = off
    c.heldout_seeds = "20260720,20260721"
    c.generate_only = False            # write responses under <workdir>/responses and stop
    c.patch_source = ""                # rerun saved responses from this folder instead of generating
    c.bootstrap_samples = 2000
    return c


def parse_ints(spec: str, key: str) -> list[int]:
    parts = [x.strip() for x in str(spec).split(",") if x.strip()]
    require(all(x.lstrip("-").isdigit() for x in parts), key, f"expected comma-separated integers, got {spec!r}")
    return [int(x) for x in parts]


def validate(c, config) -> None:
    benches = [b for b in c.benchmarks.split(",") if b]
    require(bool(benches) and all(b in BENCHMARKS for b in benches), "eval.benchmarks",
            f"comma-separated subset of {BENCHMARKS}, got {c.benchmarks!r}")
    for b in benches:
        require(bool(c.split.get(b)), f"eval.split.{b}", "a split name is required for every evaluated benchmark")
    require(bool(parse_ints(c.seeds, "eval.seeds")), "eval.seeds", "at least one seed")
    parse_ints(c.heldout_seeds, "eval.heldout_seeds")
    require(c.heldout_evidence >= 0, "eval.heldout_evidence", "must be >= 0")
    require(c.bootstrap_samples >= 100, "eval.bootstrap_samples", "must be >= 100")
    require(not (c.generate_only and c.patch_source), "eval.generate_only",
            "generate_only and patch_source are exclusive")
