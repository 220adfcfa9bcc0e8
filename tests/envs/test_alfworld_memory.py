"""What an ALFWorld process keeps of the games it closed: neither the game (TextWorld's gym
registration held every one) nor, past a bound, TextWorld's interned facts."""
import gc
import weakref

import ml_collections
import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

import mementos.core  # noqa: E402
import textworld.gym  # noqa: E402
from textworld.envs.pddl.pddl import PddlEnv  # noqa: E402

from envs.alfworld import env as alfworld_env  # noqa: E402
from envs.alfworld import unpack  # noqa: E402
from envs.alfworld.config import defaults  # noqa: E402
from envs.alfworld.scripted import ScriptedAgent  # noqa: E402
from hr1_jax.runtime import run_episode  # noqa: E402

pytestmark = pytest.mark.alfworld
AGENT = ml_collections.ConfigDict({"skill": 0.6, "hint_follow_prob": 0.7})


@pytest.fixture(scope="module")
def env():
    unpack.unpack()
    e = alfworld_env.ALFWorldEnv(defaults())
    yield e
    e.close()


@pytest.fixture(scope="module")
def tasks(env):
    return env.tasks("harness_r1_test")[:3]


def _new_pddl_envs(known: list) -> list:
    """Weak references to the engine games alive now that `known` (weak references) does not hold.
    `type(o) is`, not isinstance: isinstance reads `__class__`, which some module proxies answer with a
    deprecation warning."""
    gc.collect()
    held = [k() for k in known]
    return [weakref.ref(o) for o in gc.get_objects() if type(o) is PddlEnv and not any(o is h for h in held)]


def test_a_closed_game_is_not_kept(env, tasks):
    registered = set(textworld.gym.registry)
    before = _new_pddl_envs([])
    games = []
    for task in tasks:
        env.reset(task)
        games += _new_pddl_envs(before + games)
    assert len(games) == len(tasks)                      # one engine game per reset
    assert set(textworld.gym.registry) == registered    # no registration left behind
    env.close()
    gc.collect()
    # TatSu keeps a parser's last backtracking error after a parse that succeeded, and that error's
    # frames reach the game being loaded then: at most that one game stays until the parser's next
    # parse. Kept registrations held all of them.
    assert len([g for g in games if g() is not None]) <= 1


def test_interned_facts_are_dropped_past_the_bound_and_rebuilt_equal(env, tasks, monkeypatch):
    first = run_episode(env, ScriptedAgent(tasks[0], 0, AGENT), tasks[0], None, seed=0)
    env.close()
    held = len(mementos.core._memento_cache)
    assert held > 100                                    # a game interns hundreds of facts
    assert alfworld_env.trim_fact_cache(limit=held) is False
    assert len(mementos.core._memento_cache) == held
    assert alfworld_env.trim_fact_cache(limit=held - 1) is True
    assert len(mementos.core._memento_cache) == 0
    # closing a game trims at the module's bound; the replay builds every fact anew
    monkeypatch.setattr(alfworld_env, "FACT_CACHE_LIMIT", 0)
    again = run_episode(env, ScriptedAgent(tasks[0], 0, AGENT), tasks[0], None, seed=0)
    assert len(mementos.core._memento_cache) > 0         # the open game's facts
    env.close()
    assert len(mementos.core._memento_cache) == 0
    assert (again.trajectory, again.actions, again.final, again.reward) == \
        (first.trajectory, first.actions, first.final, first.reward)
