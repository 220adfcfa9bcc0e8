"""A closed ALFWorld game hands its fast-downward library copy to the next (envs/alfworld/downward_libs.py);
the episodes played on reused copies are compared with TextWorld's in tests/envs/test_alfworld_engine_memo.py."""
import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

from envs.alfworld import downward_libs  # noqa: E402

pytestmark = pytest.mark.alfworld


@pytest.fixture
def pddl_env(monkeypatch):
    monkeypatch.delenv("HR1_ALFWORLD_LIB_REUSE", raising=False)
    downward_libs.install()
    from textworld.envs.pddl.pddl import PddlEnv
    return PddlEnv


def test_a_closed_game_hands_its_copy_to_the_next_and_open_games_keep_their_own(pddl_env):
    first = pddl_env()
    lib = first.downward_lib
    first.close()
    second = pddl_env()
    assert second.downward_lib is lib                  # reused, not loaded again
    third = pddl_env()                                 # opened while the second is open: a copy of its own
    assert third.downward_lib is not lib
    second.close()
    third.close()


def test_a_closed_game_cannot_reach_the_copy_it_gave_away(pddl_env):
    class State:
        pass

    game = pddl_env()
    game._pddl_state = State()
    game._pddl_state.downward_lib = game.downward_lib
    game.close()
    assert not hasattr(game, "downward_lib") and game._pddl_state.downward_lib is None
    game.close()                                       # a second close gives nothing back twice
    a, b = pddl_env(), pddl_env()
    assert a.downward_lib is not b.downward_lib
    a.close()
    b.close()
