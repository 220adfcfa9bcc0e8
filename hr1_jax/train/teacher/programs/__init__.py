"""The template teacher's program library: stage-machine hook programs per benchmark.

A program is assembled from *modules*: each module is one failure mode the evidence can show
(e.g. DBBench "commits before running SQL", ALFWorld "puts the target before the transform",
WebShop "buys with required options unselected") and contributes a stage to the `on_post_step`
stage machine, a deduplicated soft hint to `make_pre_hint`, a narrow hard rule to
`on_before_action` and a sentence to the `on_init` skill. Which modules are on is decided from
the packet's runtime signals (`signals.py`). Written in the style of the reference's trained
patches (stage in `nb`, soft guidance first, hard interventions only for narrow evidence), in our
own code. Every line of every module is fixed text, so a tokenizer trained on these programs
holds common lines as single pieces and a small engineer can learn to emit them.

The hook code is real Python, one module per benchmark, named by its registry name (`dbbench.py`,
`alfworld.py`, `webshop.py`, shared helpers in `common.py`): each holds the full program with every module's
block marked, and this file cuts programs from that source text. A program is the chosen blocks
in library order (independent `if`s, later blocks win), with the benchmark's fixed helper set in
front of each hook that lists it.
"""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import json
import re

from envs.registry import training_order
from hr1_jax.data.rows import sft_assistant_text
from hr1_jax.train.teacher.programs import common

# the registered benchmarks with a program module here, in training's order
BENCHMARKS = tuple(b for b in training_order() if importlib.util.find_spec(f"{__name__}.{b}"))
HOOK_DEF = "def hook(ctx, nb):\n"
_MARK = re.compile(r"^    # (module: (\w+)|end)\n$")
_STAGE = re.compile(r"^        stage = '(\w+)'\n$", re.M)


@dataclasses.dataclass(frozen=True)
class Module:
    name: str
    skill: str = ""                 # sentence added to the on_init skill text
    think: str = ""                 # failure-pattern phrase for the <think> bullets
    stage: str = ""                 # stage name its on_post_step block sets
    stage_block: str = ""           # its on_post_step block
    hint_block: str = ""            # its make_pre_hint block (the hint for its stage)
    guard: str = ""                 # its on_before_action block (return a block/rewrite or fall through)


@dataclasses.dataclass(frozen=True)
class Hook:
    helpers: str                    # helper functions emitted in front of the hook
    head: str                       # `def hook(ctx, nb):` and the lines before the first block
    blocks: dict                    # {module name: block text}, in source order
    tail: str                       # the lines after the blocks


def _split_hook(fn) -> tuple[str, dict, str]:
    """(head, {module: block}, tail) of a hook function's source, marker lines dropped."""
    lines = inspect.getsource(fn).splitlines(keepends=True)
    if lines[0] != f"def {fn.__name__}(ctx, nb):\n":
        raise ValueError(f"{fn.__module__}.{fn.__name__}: a hook is a plain `def NAME(ctx, nb):`")
    parts, names = [[HOOK_DEF]], []
    for line in lines[1:]:
        mark = _MARK.match(line)
        if mark:
            names.append(mark.group(2))
            parts.append([])
        else:
            parts[-1].append(line)
    if not names or names[-1] is not None or None in names[:-1] or len(set(names)) != len(names):
        raise ValueError(f"{fn.__module__}.{fn.__name__}: one `# module: NAME` line per module, then one `# end`")
    blocks = {n: "".join(p) for n, p in zip(names[:-1], parts[1:-1])}
    return "".join(parts[0]), blocks, "".join(parts[-1])


def _helpers(fns) -> str:
    return "".join(inspect.getsource(f) + "\n" for f in fns)


def load(benchmark: str, src) -> tuple[tuple[Module, ...], dict[str, Hook]]:
    """(modules, {hook site: Hook}) of a benchmark's program source module `src` (its MODULES,
    HELPERS and the three staged hook functions); raises ValueError on a malformed layout."""
    hooks = {}
    for site in ("on_post_step", "make_pre_hint", "on_before_action"):
        head, blocks, tail = _split_hook(getattr(src, site))
        order = [n for n in src.MODULES if n in blocks]
        if list(blocks) != order:
            raise ValueError(f"{benchmark}.{site}: blocks must name modules of MODULES, in its order")
        hooks[site] = Hook(_helpers(src.HELPERS.get(site, ())), head, blocks, tail)
    post, hint = hooks["on_post_step"].blocks, hooks["make_pre_hint"].blocks
    if set(post) != set(hint):
        raise ValueError(f"{benchmark}: every module with a stage has a hint, and only those")
    mods = []
    for name, (skill, think) in src.MODULES.items():
        stage = _STAGE.findall(post.get(name, ""))
        if name in post and (len(stage) != 1 or not hint[name].startswith(f"    if stage == '{stage[0]}':\n")):
            raise ValueError(f"{benchmark}.{name}: its on_post_step block sets one stage, its hint tests it")
        mods.append(Module(name, skill, think, stage[0] if stage else "", post.get(name, ""), hint.get(name, ""),
                           hooks["on_before_action"].blocks.get(name, "")))
    return tuple(mods), hooks


_LOADED = {b: load(b, importlib.import_module(f"{__name__}.{b}")) for b in BENCHMARKS}
LIBRARY = {b: mods for b, (mods, _) in _LOADED.items()}
HOOKS = {b: hooks for b, (_, hooks) in _LOADED.items()}
INIT_HEAD, INIT_TAIL = (HOOK_DEF + inspect.getsource(common.on_init).split("\n", 1)[1]).split("SKILLS")


def module_names(benchmark: str) -> list[str]:
    return [m.name for m in LIBRARY[benchmark]]


def _hook_code(benchmark: str, site: str, mods) -> str:
    hook = HOOKS[benchmark][site]
    return hook.helpers + hook.head + "".join(hook.blocks.get(m.name, "") for m in mods) + hook.tail


def _on_init(mods) -> str:
    return INIT_HEAD + json.dumps(" ".join(m.skill for m in mods if m.skill)) + INIT_TAIL


def code_blocks(benchmark: str) -> list[str]:
    """Every fixed piece of source the benchmark's programs are concatenated from (hook heads and
    tails, helper sets, one block per module and hook, skill sentences): the units a program is
    composed of, which the demo tokenizer keeps as single pieces."""
    mods, hooks = LIBRARY[benchmark], HOOKS[benchmark]
    post, hint, guard = hooks["on_post_step"], hooks["make_pre_hint"], hooks["on_before_action"]
    blocks = [INIT_HEAD, INIT_TAIL, post.head, post.tail, hint.head, hint.tail, guard.head, guard.tail,
              post.helpers, guard.helpers]
    blocks += [m.stage_block for m in mods] + [m.hint_block for m in mods]
    blocks += [m.guard for m in mods] + [m.skill for m in mods]
    return [b for b in blocks if b]


def build_patch(benchmark: str, names: list[str]) -> dict:
    """The patch for the chosen modules (in library order): on_init, on_post_step and make_pre_hint
    when any module keeps a stage, on_before_action when any module has a hard rule."""
    mods = [m for m in LIBRARY[benchmark] if m.name in set(names)]
    if not mods:
        raise ValueError(f"no modules chosen for {benchmark}")
    actions = [{"type": "add_code_hook", "hook": "on_init", "code": _on_init(mods)}]
    sites = (["on_post_step", "make_pre_hint"] if any(m.stage for m in mods) else []) + \
        (["on_before_action"] if any(m.guard for m in mods) else [])
    actions += [{"type": "add_code_hook", "hook": s, "code": _hook_code(benchmark, s, mods)} for s in sites]
    desc = THINK_FIXED[8] + ", ".join(m.name.replace("_", " ") for m in mods) + "."
    return {"schema_version": "harness-r1-patch-v1", "benchmark": benchmark, "description": desc,
            "actions": actions}


THINK_FIXED = ("- Recurring failure in {benchmark}: the agent ", "- State in nb: ", "stage and last_hint only",
               "- Hooks: on_init states the workflow; ",
               "on_post_step tracks the stage and make_pre_hint gives one deduplicated hint per stage; ",
               "on_before_action enforces ", "no hard interventions",
               "- Regression risk: rules fire only on the narrow evidence above, so tasks the agent already "
               "solves are untouched.", "Stage-tracking harness for: ")


def think_bullets(benchmark: str, names: list[str]) -> str:
    """The four `<think>` bullets of the reference's quality contract."""
    mods = [m for m in LIBRARY[benchmark] if m.name in set(names)]
    stages = [m.stage for m in mods if m.stage]
    guards = [m.name.replace("_", " ") for m in mods if m.guard]
    return "\n".join([
        THINK_FIXED[0].format(benchmark=benchmark) + "; ".join(m.think for m in mods) + ".",
        THINK_FIXED[1] + (", ".join(["stage"] + stages) if stages else THINK_FIXED[2]) + ".",
        THINK_FIXED[3] + (THINK_FIXED[4] if stages else "")
        + (THINK_FIXED[5] + ", ".join(guards) if guards else THINK_FIXED[6]) + ".",
        THINK_FIXED[7],
    ])


def render_response(benchmark: str, names: list[str], protocol: str = "prefill_think_patch") -> str:
    """The engineer's response text under the response protocol (prefill: the continuation after
    the template's `<think>\\n`)."""
    return sft_assistant_text(think_bullets(benchmark, names), build_patch(benchmark, names), protocol)
