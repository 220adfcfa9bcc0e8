"""The teacher's hook programs are real Python source: the assembled patches are byte-identical to
the string-literal library they replaced (hashes taken before the move), every program file
compiles, lints clean and runs as plain code exactly as the sandbox runs the emitted hook, and the
assembler rejects a malformed layout."""
import copy
import hashlib
import importlib
import inspect
import itertools
import json
import py_compile
import types
from pathlib import Path

import pytest

from hr1_jax.patch.runner import call_hook
from hr1_jax.patch.sandbox import compile_hook
from hr1_jax.patch.schema import normalize_patch
from hr1_jax.train.teacher import programs as P

PROGRAM_DIR = Path(P.__file__).parent
# sha256 over every module subset's (patch, think bullets, response), and over code_blocks, as the
# string-literal programs.py emitted them (commit eef8c6e). A deliberate program change updates these.
SNAPSHOT = {
    "dbbench": ("6fedddc1fafe39c40797ee4a6e519438450131cbf5fc78f7d1635b6e6797975d",
                "bca33d8a194c4b6ecb6d5da983732cfcab84def2b799569589c933f7c9bc9b35"),
    "alfworld": ("330fd13309387d222bcd5675a5796e4e48b9792c73e85bf65b94a29089a17114",
                 "6f158c8deb68f632a4bb66cea2941560964cb5e0fd3b52982eeb47d25b48bb1b"),
    "webshop": ("89a6e359f879363b3dcc540ee782b7e0a18ea347c7c72db005b58dbaf1cf91d0",
                "9bce0424964004d03f92b5375dae0189506c43ea84e8ca8761f688374c0c80cc"),
}


def _sha(x) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _subsets(bench):
    names = P.module_names(bench)
    return [list(c) for r in range(1, len(names) + 1) for c in itertools.combinations(names, r)]


@pytest.mark.parametrize("bench", sorted(SNAPSHOT))
def test_emitted_programs_are_byte_identical_to_the_string_library(bench):
    got = [[P.build_patch(bench, s), P.think_bullets(bench, s), P.render_response(bench, s)]
           for s in _subsets(bench)]
    assert (_sha(got), _sha(P.code_blocks(bench))) == SNAPSHOT[bench]


def test_program_files_compile_and_lint_clean(tmp_path):
    pyflakes_api = pytest.importorskip("pyflakes.api")
    from pyflakes import reporter

    files = sorted(PROGRAM_DIR.glob("*.py"))
    assert {f.stem for f in files} >= set(P.BENCHMARKS) | {"common", "__init__"}
    for f in files:
        py_compile.compile(str(f), cfile=str(tmp_path / f"{f.stem}.pyc"), doraise=True)
    out = []
    rep = reporter.Reporter(types.SimpleNamespace(write=out.append), types.SimpleNamespace(write=out.append))
    pyflakes_api.checkRecursive([str(f) for f in files], rep)
    # A hook's head reads the context sections its blocks may use (fixed text for every subset), so
    # a head name the full program leaves unread is expected; anything else is a finding.
    head_unused = [f"local variable '{n}' is assigned to but never used" for n in ("a", "p", "s")]
    findings = [m for m in "".join(out).splitlines() if m.strip() and not any(m.endswith(h) for h in head_unused)]
    assert findings == []


@pytest.mark.parametrize("bench", P.BENCHMARKS)
def test_every_subset_passes_patch_validation(bench):
    for names in _subsets(bench):
        patch = P.build_patch(bench, names)
        assert normalize_patch(patch, enforce_hook_once=True)["actions"] == patch["actions"]


@pytest.mark.parametrize("bench", P.BENCHMARKS)
def test_library_structure(bench):
    src = importlib.import_module(f"{P.__name__}.{bench}")
    mods = P.LIBRARY[bench]
    assert [m.name for m in mods] == list(src.MODULES)
    for m in mods:
        assert m.think and (m.skill or m.stage or m.guard), m.name
        assert bool(m.stage) == bool(m.stage_block) == bool(m.hint_block), m.name
    # the full program is the source functions themselves, renamed to `hook`, with helpers in front
    full = {a["hook"]: a["code"] for a in P.build_patch(bench, list(src.MODULES))["actions"]}
    for site in ("on_post_step", "make_pre_hint", "on_before_action"):
        code = inspect.getsource(getattr(src, site))
        body = "".join(l for l in code.splitlines(keepends=True)[1:] if not P._MARK.match(l))
        assert full[site] == P.HOOKS[bench][site].helpers + P.HOOK_DEF + body


# Contexts that reach every hard rule, rewrite and stage of the three libraries (and fall-throughs).
CTXS = {
    "dbbench": [
        {"action": {"tool": "commit_final_answer", "answers": ["5"]}, "state": {},
         "predicates": {"no_sql_yet": True}},
        {"action": {"tool": "commit_final_answer", "answers": ["The answer is 5 of them here"]}, "state": {},
         "predicates": {}},
        {"action": {"tool": "commit_final_answer", "answers": []}, "state": {},
         "predicates": {"commit_empty_answer": True}},
        {"action": {"tool": "commit_final_answer", "answers": []}, "state": {},
         "predicates": {"mutation_task": True, "mutation_not_attempted": True}},
        {"action": {"tool": "execute_sql"}, "state": {"mutation_attempted": True}, "predicates": {"mutation_task": True}},
        {"action": {"tool": "execute_sql"}, "state": {"last_error_text": "table does not exist"}, "predicates": {}},
        {"action": {"tool": "execute_sql"}, "state": {}, "predicates": {"repeated_sql": True}},
        {"action": {"tool": "execute_sql"}, "state": {}, "predicates": {}},
    ],
    "alfworld": [
        {"action": {"final_action": "go to the fridge", "raw": "go to the fridge", "in_admissible": False},
         "admissible": ["go to fridge 1", "inventory"], "task": {}, "world": {}, "predicates": {}, "state": {}},
        {"action": {"final_action": "put egg 1 in/on garbagecan 1", "in_admissible": True},
         "task": {"task_type": "pick_heat_then_place", "target_type": "egg"},
         "world": {"inventory": ["egg 1"], "transformed": {}}, "admissible": ["put egg 1 in/on garbagecan 1"],
         "predicates": {}, "state": {}},
        {"action": {"final_action": "use desklamp 1", "in_admissible": True},
         "task": {"task_type": "look_at_obj_in_light", "target_type": "book"}, "world": {"inventory": []},
         "admissible": ["use desklamp 1", "take book 2 from desk 1"], "predicates": {}, "state": {}},
        {"action": {"final_action": "look", "in_admissible": True},
         "task": {"task_type": "pick_two_obj_and_place", "target_type": "cd"},
         "world": {"inventory": [], "placed_count": 1}, "admissible": ["look"], "predicates": {}, "state": {}},
        {"action": {"final_action": "look", "in_admissible": True}, "task": {"task_type": "pick_and_place"},
         "world": {}, "admissible": ["look"], "predicates": {"same_action_repeated": True}, "state": {}},
    ],
    "webshop": [
        {"action": {"value_normalized": "buy now"}, "task": {"required_color": "Red", "required_size": "XL"},
         "state": {"clickables": ["red", "xl", "buy now"]}, "predicates": {"required_options_unselected": True}},
        {"action": {"value_normalized": "buy now"}, "task": {"required_color": "blue"},
         "state": {"clickables": ["red", "buy now"]}, "predicates": {"required_options_unselected": True}},
        {"action": {"value_normalized": "buy now"}, "task": {}, "state": {},
         "predicates": {"product_price_over_budget": True}},
        {"action": {"value_normalized": "search"}, "task": {}, "state": {}, "predicates": {"search_loop_detected": True}},
        {"action": {"value_normalized": "back to search"}, "task": {}, "state": {}, "predicates": {}},
    ],
}


@pytest.mark.parametrize("bench", P.BENCHMARKS)
def test_program_runs_as_plain_python_as_in_the_sandbox(bench):
    """Each hook function called directly gives the sandboxed full program's result and notebook."""
    src = importlib.import_module(f"{P.__name__}.{bench}")
    hooks = {a["hook"]: compile_hook(a["code"], bench)
             for a in P.build_patch(bench, list(src.MODULES))["actions"]}
    kinds = set()
    for ctx in CTXS[bench]:
        nb_py, nb_box = {"chosen": ""}, {"chosen": ""}
        for site in ("on_init", "on_before_action", "on_post_step", "make_pre_hint", "make_pre_hint"):
            fn = getattr(src if site != "on_init" else P.common, site)
            want = fn(copy.deepcopy(ctx), nb_py)
            got = call_hook(hooks[site], copy.deepcopy(ctx), nb_box, site).result
            if site == "on_init":  # the source's SKILLS is the chosen skill sentences; the runner adds an id
                got, want = got["skills"][0]["text"], " ".join(m.skill for m in P.LIBRARY[bench] if m.skill)
            assert got == want and nb_box == nb_py, (site, ctx)
            kinds.add((site, got.get("kind", True) if isinstance(got, dict) else bool(got)))
        assert nb_py["stage"] not in ("start", "")
    # the contexts reach a block, a rewrite (where the library has one) and a hint
    assert ("on_before_action", "block_and_prompt") in kinds and ("make_pre_hint", True) in kinds
    assert bench == "dbbench" or ("on_before_action", "rewrite_action") in kinds


def _ok_post(ctx, nb):
    stage = 'working'
    # module: one
    if ctx.get('x'):
        stage = 'x_seen'
    # end
    nb['stage'] = stage


def _ok_hint(ctx, nb):
    stage = nb.get('stage')
    msg = ''
    # module: one
    if stage == 'x_seen':
        msg = "x"
    # end
    return msg


def _no_end(ctx, nb):
    # module: one
    return None


def _unknown_module(ctx, nb):
    # module: two
    # end
    return None


def _wrong_stage_hint(ctx, nb):
    stage = nb.get('stage')
    msg = ''
    # module: one
    if stage == 'other':
        msg = "x"
    # end
    return msg


def _empty(ctx, nb):
    # end
    return None


def _src(post, hint, guard=_empty):
    return types.SimpleNamespace(MODULES={"one": ("", "does x")}, HELPERS={}, on_post_step=post,
                                 make_pre_hint=hint, on_before_action=guard)


def test_assembler_reads_a_layout_and_rejects_malformed_ones():
    mods, hooks = P.load("toy", _src(_ok_post, _ok_hint))
    assert mods[0].stage == "x_seen" and hooks["on_post_step"].head == "def hook(ctx, nb):\n    stage = 'working'\n"
    assert hooks["on_post_step"].tail == "    nb['stage'] = stage\n" and hooks["on_before_action"].blocks == {}
    for bad, why in ((_src(_no_end, _ok_hint), "then one `# end`"), (_src(_ok_post, _unknown_module), "in its order"),
                     (_src(_ok_post, _wrong_stage_hint), "its hint tests it"), (_src(_ok_post, _empty), "has a hint")):
        with pytest.raises(ValueError, match=why):
            P.load("toy", bad)
