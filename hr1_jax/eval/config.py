"""Config section `eval`: fixed-batch run-patch-rerun evaluation, baselines, held-out transfer, reports."""
import ml_collections

from envs.registry import benchmark, names
from hr1_jax.config import ConfigError, parse_tasks, require
from hr1_jax.eval.tasks import ALL, TaskSpecs


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
    c.benchmarks = ",".join(names())
    # Test split per benchmark, its descriptor's test_split (ALFWorld: the 432 available Harness-R1 test games).
    c.split = ml_collections.ConfigDict({b: benchmark(b).test_split for b in names()})
    # Task ids per benchmark: `default` for all, a benchmark's own key overrides it ("" = default);
    # "all" = the whole split. `--config.eval.tasks=all` sets the default and clears the overrides.
    c.tasks = TaskSpecs.of("0:20")
    c.seeds = "0,1"                    # target seeds: each has its own baseline and reruns
    c.self_refine = True
    c.best_of_n = True
    c.best_of_n_temperature = 0.7      # for endpoint targets (distinct attempts need sampling)
    c.heldout_evidence = 10            # failures per benchmark for held-out transfer; 0 = off
    c.heldout_seeds = "20260720,20260721"
    c.generate_only = False            # write responses under <workdir>/responses and stop
    c.patch_source = ""                # rerun saved responses from this folder instead of generating
    c.bootstrap_samples = 2000
    c.prompt_style = ""                # checkpoint engineers: "" = the style the checkpoint carries
    # Lifecycle ablation: every evaluated patch is rerun once per hook site with that site disabled.
    c.ablation = False
    # More patch sources in one run, by key: {spec (checkpoint / URL / teacher / reference:...),
    # name, model (endpoints), api_key_env}. E.g. c.eval.editors.glm = dict(spec="https://...",
    # model="glm-5.2", name="GLM-5.2", api_key_env="GLM_API_KEY").
    c.editors = ml_collections.ConfigDict()
    # Several frozen targets in one run, by key: overrides of the `target` section (kind, name,
    # base_url, model, api_key_env, ...); each is evaluated under <workdir>/targets/<key>.
    c.targets = ml_collections.ConfigDict()
    # Merge the eval_result.json of these comma-separated workdirs (e.g. one per benchmark) into one
    # report in this workdir; nothing is run.
    c.merge_from = ""
    return c


def parse_ints(spec: str, key: str) -> list[int]:
    parts = [x.strip() for x in str(spec).split(",") if x.strip()]
    require(all(x.lstrip("-").isdigit() for x in parts), key, f"expected comma-separated integers, got {spec!r}")
    return [int(x) for x in parts]


def validate(c, config) -> None:
    benches, known = [b for b in c.benchmarks.split(",") if b], names()
    require(bool(benches) and all(b in known for b in benches), "eval.benchmarks",
            f"comma-separated subset of {known}, got {c.benchmarks!r}")
    for b in benches:
        require(bool(c.split.get(b)), f"eval.split.{b}", "a split name is required for every evaluated benchmark")
    for key, spec in c.tasks.items():
        require(key == "default" or key in known, f"eval.tasks.{key}", f"not a benchmark of {known}")
        if spec and str(spec).strip() != ALL:
            try:   # ids against the split sizes: at start-up (eval.tasks.resolve_all)
                parse_tasks(spec)
            except ConfigError as e:
                raise ConfigError(f"eval.tasks.{key}", str(e).split(": ", 1)[1]) from None
    require(bool(parse_ints(c.seeds, "eval.seeds")), "eval.seeds", "at least one seed")
    parse_ints(c.heldout_seeds, "eval.heldout_seeds")
    require(c.heldout_evidence >= 0, "eval.heldout_evidence", "must be >= 0")
    require(c.bootstrap_samples >= 100, "eval.bootstrap_samples", "must be >= 100")
    require(not (c.generate_only and c.patch_source), "eval.generate_only",
            "generate_only and patch_source are exclusive")
    for key, entry in c.editors.items():
        require(isinstance(entry, ml_collections.ConfigDict) and bool(entry.get("spec")), f"eval.editors.{key}",
                "needs spec (a checkpoint folder, an http(s):// endpoint, 'teacher' or 'reference:...')")
        unknown = sorted(set(entry.keys()) - {"spec", "name", "model", "api_key_env"})
        require(not unknown, f"eval.editors.{key}", f"unknown keys {unknown}; known: spec, name, model, api_key_env")
    for key, entry in c.targets.items():
        unknown = sorted(set(entry.keys()) - set(config.target.keys())) if isinstance(entry, ml_collections.ConfigDict) else ["?"]
        require(not unknown, f"eval.targets.{key}", f"overrides of the target section; unknown keys {unknown}")
