"""ALFWorld without the engine: shipped data, splits, identity, goal parsing, action matching,
surface translation, observation trackers and the scripted target's message handling."""
import hashlib
import io
import json
import tarfile

import pytest

from envs.alfworld import actions as A
from envs.alfworld import tasks as T
from envs.alfworld import unpack
from envs.alfworld.world import Tracker, seen_items

ENV_VERSION = "test-version"


@pytest.fixture(scope="module")
def root():
    return unpack.unpack()


def test_unpack_is_idempotent_and_stamped(root):
    assert unpack.is_unpacked(root, unpack.archive_sha256())
    assert unpack.unpack() == root          # second call: stamp matches, nothing to do
    assert len(list((root / unpack.ROOT_NAME).glob("*/*/*/game.tw-pddl"))) == 4027


def _tar(path, members):
    """A small tar at `path`: (name, kind) with kind 'file', 'dir' or 'symlink'."""
    with tarfile.open(path, "w") as tar:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
            else:
                data = name.encode()
                info.size, info.mode = len(data), 0o4777
                tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("with_filters", [True, False])
def test_unpack_works_with_and_without_tarfile_filters(tmp_path, monkeypatch, with_filters):
    # Without filters = CPython 3.11.0-3.11.3 (Debian 12's python3.11), where extractall(filter=) fails.
    if not with_filters:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    archive = _tar(tmp_path / "games.tar", [(unpack.ROOT_NAME, "dir"),
                                            (f"{unpack.ROOT_NAME}/a/game.tw-pddl", "file")])
    dest = unpack.unpack(tmp_path / "out", archive=archive)
    game = dest / unpack.ROOT_NAME / "a" / "game.tw-pddl"
    assert game.read_text() == f"{unpack.ROOT_NAME}/a/game.tw-pddl"
    assert game.stat().st_mode & 0o7777 == 0o755     # setuid and world-write bits dropped
    assert unpack.is_unpacked(dest, unpack.archive_sha256(archive))


@pytest.mark.parametrize("bad", [f"{unpack.ROOT_NAME}/../escaped", "/tmp/absolute", "elsewhere/x"])
def test_unpack_refuses_members_outside_the_game_tree(tmp_path, monkeypatch, bad):
    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    archive = _tar(tmp_path / "bad.tar", [(f"{unpack.ROOT_NAME}/ok", "file"), (bad, "file")])
    with pytest.raises(ValueError, match="unsafe member"):
        unpack.unpack(tmp_path / "out", archive=archive)
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "out" / unpack.STAMP).exists()


def test_unpack_refuses_links(tmp_path):
    archive = _tar(tmp_path / "link.tar", [(f"{unpack.ROOT_NAME}/passwd", "symlink")])
    with pytest.raises(ValueError, match="unsafe member"):
        unpack.unpack(tmp_path / "out", archive=archive)


def test_split_sizes_match_the_shipped_lists(root):
    sizes = {}
    for name in ("harness_r1_test", "standard", "dev", "new_std"):
        tasks, listed = T.load_split(root, name, ENV_VERSION)
        sizes[name] = (len(tasks), listed)
        assert [t.task_id for t in tasks] == list(range(len(tasks)))
    assert sizes == {"harness_r1_test": (432, 500), "standard": (50, 50), "dev": (20, 20),
                     "new_std": (93, 109)}
    missing = json.loads((T.SPLITS_DIR / "missing_from_archive.json").read_text())
    assert len(missing["harness_r1_test_set"]) == 500 - 432


def test_train_split_excludes_every_test_game(root):
    train, _ = T.load_split(root, "train", ENV_VERSION)
    test_games = {t.payload["game"] for s in T.TEST_SPLITS for t in T.load_split(root, s, ENV_VERSION)[0]}
    assert len(train) > 2000
    assert not test_games & {t.payload["game"] for t in train}


def test_task_identity_hashes_the_game_file(root):
    tasks, _ = T.load_split(root, "dev", ENV_VERSION)
    t = tasks[3]
    raw = (root / t.payload["game"]).read_bytes()
    assert t.payload["game_sha256"] == hashlib.sha256(raw).hexdigest()
    assert t.payload["env_version"] == ENV_VERSION
    assert t.oracle["walkthrough"] == json.loads(raw)["walkthrough"]
    again, _ = T.load_split(root, "dev", ENV_VERSION)
    assert again[3].payload == t.payload


def test_goal_parser_agrees_with_folder_family_on_the_test_split(root):
    tasks, _ = T.load_split(root, "harness_r1_test", ENV_VERSION)
    for t in tasks:
        assert t.payload["task_type"] == T.family_of_path(t.payload["game"]), t.payload["goal"]
        assert t.payload["target_type"] and t.payload["destination_type"]
    assert {t.payload["task_type"] for t in tasks} == set(T.TASK_TYPES)


@pytest.mark.parametrize("goal,expected", [
    ("cool some pan and put it in countertop.", ("pick_cool_then_place", "pan", "countertop")),
    ("put a hot tomato in sidetable.", ("pick_heat_then_place", "tomato", "sidetable")),
    ("put a clean ladle in drawer.", ("pick_clean_then_place", "ladle", "drawer")),
    ("find two candle and put them in cabinet.", ("pick_two_obj", "candle", "cabinet")),
    ("put two candle in cabinet.", ("pick_two_obj", "candle", "cabinet")),
    ("examine the book with the desklamp.", ("look_at_obj", "book", "desklamp")),
    ("look at alarmclock under the desklamp.", ("look_at_obj", "alarmclock", "desklamp")),
    ("put some pencil on sidetable.", ("pick_and_place", "pencil", "sidetable")),
    ("Your task is to: put a pencil in shelf.", ("pick_and_place", "pencil", "shelf")),
    ("dance around", ("", "", "")),
])
def test_parse_goal(goal, expected):
    p = T.parse_goal(goal)
    assert (p["task_type"], p["target_type"], p["destination_type"]) == expected


def test_test_alias_is_the_harness_r1_split(root):
    alias, _ = T.load_split(root, "test", ENV_VERSION)
    canonical, _ = T.load_split(root, "harness_r1_test", ENV_VERSION)
    assert alias == canonical and alias[0].split == "harness_r1_test"


def test_unknown_split_is_a_clear_error(root):
    with pytest.raises(ValueError, match="unknown ALFWorld split"):
        T.load_split(root, "nope", ENV_VERSION)


ADM = ["go to countertop 1", "go to fridge 1", "take mug 1 from countertop 1",
       "put pan 1 in/on countertop 1", "examine countertop 1", "look", "inventory"]


@pytest.mark.parametrize("text,expected", [
    ("go to fridge 1", "go to fridge 1"),
    ("ACTION: Go To Fridge 1.", "go to fridge 1"),
    ("put pan 1 in countertop 1", "put pan 1 in/on countertop 1"),
    ("move pan 1 to countertop 1", "put pan 1 in/on countertop 1"),
    ("take mug from countertop 1", "take mug 1 from countertop 1"),
    ("look around", "look"),
    ("search for pan", "search for pan"),          # no close command: executed as is
    ("pick up the pan", "pick up the pan"),
    ("open fridge 1", "open fridge 1"),            # known verb, none admissible: no snapping
])
def test_process_action(text, expected):
    assert A.process_action(text, ADM) == expected


def test_surface_translation_round_trip():
    assert A.to_surface_command("move pan 1 to countertop 2") == "put pan 1 in/on countertop 2"
    assert A.to_surface_command("move pan 1 to countertop 2", put_surface=False) == "move pan 1 to countertop 2"
    assert A.to_engine_command("put pan 1 in/on countertop 2") == "move pan 1 to countertop 2"
    assert A.to_engine_command("go to countertop 2") == "go to countertop 2"
    assert (A.to_surface_observation("You move the pan 1 to the countertop 2.")
            == "You put the pan 1 in/on the countertop 2.")


FIRST = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 2, "
         "a cabinet 1, a countertop 1, a fridge 1, and a microwave 1.\nYour task is to: cool some pan "
         "and put it in countertop.")


def test_seen_items_parses_lists():
    assert seen_items(FIRST) == ["cabinet 2", "cabinet 1", "countertop 1", "fridge 1", "microwave 1"]
    assert seen_items("On the desk 1, you see nothing.") == []
    assert seen_items("You open the fridge 1. The fridge 1 is open. In it, you see a egg 1, and a pan 2.") == [
        "egg 1", "pan 2"]


def test_tracker_world_model():
    tr = Tracker(FIRST, "pan", "countertop")
    steps = [
        ("go to cabinet 1", "You arrive at cabinet 1. On the cabinet 1, you see a pan 1, and a cup 1."),
        ("take pan 1 from cabinet 1", "You pick up the pan 1 from the cabinet 1."),
        ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."),
        ("cool pan 1 with fridge 1", "You cool the pan 1 using the fridge 1."),
        ("look", "Nothing happens."),
        ("look", "Nothing happens."),
        ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a desklamp 1."),
        ("put pan 1 in/on countertop 1", "You put the pan 1 in/on the countertop 1."),
    ]
    for action, obs in steps:
        tr.update(action, action, obs)
    w = tr.world()
    assert w["current_location"] == "countertop 1"
    assert w["inventory"] == []
    assert w["object_at"]["pan 1"] == "countertop 1" and w["object_at"]["cup 1"] == "cabinet 1"
    assert w["visited"] == ["cabinet 1", "fridge 1", "countertop 1"]
    assert w["unvisited"] == ["cabinet 2", "microwave 1"]
    assert (w["placed_count"], w["placed_items"], w["placed_locations"]) == (1, ["pan 1"], ["countertop 1"])
    assert w["transformed"] == {"pan 1": "cool"}
    assert w["lamp_location"] == "countertop 1"
    assert w["target_found"] is False          # the only pan is placed
    s = tr.state(remaining=10)
    assert s["nothing_happens_count"] == 2 and s["repeated_action_count"] == 1
    tr.update("look", "look", "Nothing happens.")
    tr.update("look", "look", "Nothing happens.")
    assert tr.state(3)["repeated_action_count"] == 2 and tr.state(3)["repeated_observation_count"] == 2


def test_balanced_sample_covers_every_family(root):
    tasks, _ = T.load_split(root, "harness_r1_test", ENV_VERSION)
    sample = T.balanced_sample(tasks, 10)
    assert len(sample) == 10 and len({t.task_id for t in sample}) == 10
    assert {t.payload["task_type"] for t in sample} == set(T.TASK_TYPES)
    assert T.balanced_sample(tasks, 10) == sample
