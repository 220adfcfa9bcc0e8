"""The TextWorld memos (envs/alfworld/engine_memo.py) and the reused fast-downward library copies
(envs/alfworld/downward_libs.py) change how fast the engine talks, never what it says."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

from envs.alfworld import engine_memo  # noqa: E402

pytestmark = pytest.mark.alfworld
REPO = Path(__file__).resolve().parents[2]

# Plays 3 tasks twice each (first play parses and translates, the second replays from the memos), the
# second time under a shipped Harness-R1 patch (hooks read every observation), and prints every
# episode's trajectory, final state and counts as JSON, with what the memos did in this process and
# the fast-downward library copies it loaded, reused and holds mapped at the end.
EPISODES = r"""
import json, sys
import ml_collections
from envs.alfworld import downward_libs, engine_memo
from envs.alfworld.config import defaults
from envs.alfworld.env import ALFWorldEnv
from envs.alfworld.scripted import ScriptedAgent
from envs.alfworld.tasks import balanced_sample
from hr1_jax.patch import compile_patch
from hr1_jax.runtime import run_episode
patch = compile_patch(json.load(open(sys.argv[1])), "alfworld")
env = ALFWorldEnv(defaults())
tasks = balanced_sample(env.tasks("harness_r1_test"), 3)
agent = ml_collections.ConfigDict({"skill": 0.6, "hint_follow_prob": 0.7})
out = [run_episode(env, ScriptedAgent(t, 0, agent), t, p, seed=0).to_dict()
       for p in (None, patch) for t in tasks]
import textworld.envs.pddl.textgen as textgen
memo = isinstance(textgen._PARSER, engine_memo.MemoParser)
print(json.dumps({"episodes": [{k: e[k] for k in ("trajectory", "actions", "final", "counts", "reward", "status")} for e in out],
                  "memo": memo, "hits": textgen._PARSER.cache_info().hits if memo else 0,
                  "shallow": engine_memo.shallow_contexts(), "translations": engine_memo.translations,
                  "initial_states": engine_memo.initial_states,
                  "libs": downward_libs.counts,
                  "mapped": downward_libs.mapped_copies()},
                 sort_keys=True, default=str))
"""


def _play(memo: bool, sas_cache) -> dict:
    """The episodes, with the memos and library reuse on, or both off (TextWorld as it is)."""
    patch = next((REPO / "hr1_jax/patch/reference_patches/examples/heldout_generalization").glob("*/seed*/alfworld.json"))
    env = dict(os.environ, HR1_ALFWORLD_ENGINE_MEMO="1" if memo else "0", HR1_ALFWORLD_SAS_CACHE=str(sas_cache),
               HR1_ALFWORLD_LIB_REUSE="1" if memo else "0", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", EPISODES, str(patch)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_episodes_are_the_same_with_and_without_the_memos(tmp_path):
    cache = tmp_path / "sas_cache"
    plain = _play(memo=False, sas_cache=cache)
    assert not plain["memo"] and not cache.exists()          # the engine as it is: nothing kept on disk
    assert plain["libs"] == {"loaded": 0, "reused": 0} and plain["mapped"] == 6   # a copy per game, all kept
    assert plain["initial_states"] == {"reused": 0}
    written = _play(memo=True, sas_cache=cache)              # translates each game once, writes it
    read = _play(memo=True, sas_cache=cache)                 # a later process: every translation from disk
    assert written["translations"] == {"translated": 6, "from_disk": 0} and len(list(cache.glob("*.sas.z"))) == 6
    assert read["translations"] == {"translated": 0, "from_disk": 6}
    for memo in (written, read):
        assert memo["memo"] and memo["hits"] > 0 and memo["shallow"]
        assert memo["libs"] == {"loaded": 1, "reused": 5} and memo["mapped"] == 1   # one copy, game after game
        assert memo["initial_states"] == {"reused": 6}       # every reset took the state its load built
        assert len(memo["episodes"]) == 6
        assert any(e["counts"].get("hook_calls") for e in memo["episodes"])   # the patch's hooks ran
        for a, b in zip(plain["episodes"], memo["episodes"]):
            assert a == b


def test_a_task_parsed_for_a_stored_translation_is_the_one_translating_returns(tmp_path):
    import contextlib
    import io

    import fast_downward.interface
    import textworld.envs.pddl.logic as pddl_logic
    from envs.alfworld.env import ALFWorldEnv

    env = ALFWorldEnv()
    game = json.loads((env.root / env.tasks("harness_r1_test")[5].payload["game"]).read_text())
    domain = pddl_logic.GameLogic(domain=game["pddl_domain"], grammar=game["grammar"]).domain
    argv = list(sys.argv)
    try:
        task, sas = fast_downward.interface.pddl2sas(domain, game["pddl_problem"])
        parsed = engine_memo.parse_task(domain, game["pddl_problem"])
    finally:
        sys.argv[:] = argv

    def dump(t):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            t.dump()
        return out.getvalue()

    assert dump(parsed) == dump(task) and len(task.actions) > 0
    path = tmp_path / "x.sas.z"
    engine_memo.write_sas(path, sas)
    assert engine_memo.read_sas(path) == sas
    path.write_bytes(path.read_bytes()[:-10])                       # a damaged file is a miss, not a game
    assert engine_memo.read_sas(path) is None
    assert engine_memo.read_sas(tmp_path / "missing.sas") is None


def test_a_translation_folder_that_cannot_be_made_keeps_translations_in_the_process(tmp_path):
    (tmp_path / "file").write_text("")
    assert engine_memo._writable(str(tmp_path / "file" / "sas_cache")) is None
    assert engine_memo._writable(str(tmp_path / "sas_cache")) == tmp_path / "sas_cache"


@pytest.mark.parametrize("expression,pure", [
    ("o.name", True), ("r.indefinite", True), ("o.indefinite + ' ' + o.name ", True), ("r.name or r.id", True),
    ("r", True), ("setattr(o, 'name', 'x')", False), ("o.names.append(1)", False), ("(x := o)", False),
    ("o.name[0]", False), ("[o for o in r]", False), ("lambda: o", False), ("o.name =", False)])
def test_pure_read(expression, pure):
    assert engine_memo.pure_read(expression) is pure


def test_a_grammar_expression_that_writes_turns_contexts_back_to_deep_copies(monkeypatch):
    monkeypatch.delenv("HR1_ALFWORLD_ENGINE_MEMO", raising=False)
    engine_memo.install()
    import textworld.envs.pddl.textgen as textgen
    monkeypatch.setattr(engine_memo, "_shallow_contexts", True)

    class Entity:
        name = "apple"

    entity = Entity()
    context = {"state": None, "facts": [], "variables": {"o": entity}, "mapping": {}, "entity_infos": {}}
    reads = textgen.ContextSensitiveGrammar.parse(json.dumps({"r": [{"rhs": "the {o.name}"}]}))
    assert reads.derive("take #r#", context) == "take the apple"
    assert engine_memo.shallow_contexts()
    writes = textgen.ContextSensitiveGrammar.parse(
        json.dumps({"r": [{"rhs": "the {setattr(o, 'name', 'pear') or o.name}"}]}))
    assert not engine_memo.shallow_contexts()      # switched when the rule was parsed, before any derivation
    assert writes.derive("take #r#", context) == "take the pear"
    assert entity.name == "apple"                  # the write reached a deep copy, not the game's entity


def test_context_copies_share_the_entities_but_not_the_dicts_a_derivation_extends(monkeypatch):
    monkeypatch.delenv("HR1_ALFWORLD_ENGINE_MEMO", raising=False)
    engine_memo.install()
    import textworld.envs.pddl.textgen as textgen
    entity, placeholder = object(), object()
    context = {"state": object(), "facts": [], "variables": {"o": entity}, "mapping": {placeholder: entity},
               "entity_infos": {}}
    copy = textgen.copy_context(context)
    assert copy.keys() == context.keys() and engine_memo.shallow_contexts()
    assert copy["variables"] == context["variables"] and copy["variables"]["o"] is entity
    assert copy["mapping"] == context["mapping"]
    copy["variables"]["r"] = copy["mapping"]["r"] = "new"   # what `textgen.query` does to its copy
    assert "r" not in context["variables"] and "r" not in context["mapping"]
    assert copy["state"] is context["state"] and copy["facts"] is context["facts"]


def test_a_translation_that_cannot_be_stored_is_only_left_uncached(tmp_path):
    engine_memo.write_sas(tmp_path / "gone" / "x.sas.z", "begin_version\n3\nend_version\n")   # no such folder
    assert not (tmp_path / "gone").exists() and list(tmp_path.iterdir()) == []


def test_a_reset_takes_the_state_its_load_built_once_and_no_other():
    from types import SimpleNamespace

    class Logic:   # stands in for textworld.envs.pddl.logic
        built = 0
        GameLogic = "passed through"

        @staticmethod
        def PddlState(downward_lib, pddl_problem, logic):
            Logic.built += 1
            return SimpleNamespace(downward_lib=downward_lib, pddl_problem=pddl_problem, _logic=logic)

    logic = engine_memo._LogicForPddlEnv(Logic)
    lib, problem, game = object(), "(define (problem p))", object()
    loaded = logic.PddlState(lib, problem, game)           # load
    logic.loaded(loaded)
    assert logic.PddlState(lib, problem, game) is loaded    # the reset after it
    assert logic.PddlState(lib, problem, game) is not loaded and Logic.built == 2   # a later reset builds anew
    for other in ((object(), problem, game), (lib, "(define (problem q))", game), (lib, problem, object())):
        logic.loaded(loaded)
        assert logic.PddlState(*other) is not loaded        # another copy, problem or logic: not that game's state
    assert logic.GameLogic == "passed through"
