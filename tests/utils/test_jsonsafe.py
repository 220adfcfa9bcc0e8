"""json_safe / the JSON writers: lone surrogates, foreign objects and deep nesting are stored
sanitised, valid data unchanged, and a failing write never truncates the file it replaces."""
import json

import pytest

from envs.base import canonical_sha256
from hr1_jax.utils.jsonsafe import TOO_DEEP, dumps, dumps_line, json_safe, write_json, write_jsonl

SURROGATE = chr(0xD800)


def test_json_safe_replaces_lone_surrogates_in_values_and_keys():
    value = {"a" + SURROGATE: ["x" + SURROGATE, ("y", {"z": SURROGATE})], 3: None}
    assert json_safe(value) == {"a?": ["x?", ["y", {"z": "?"}]], 3: None}
    dumps(value).encode("utf-8")  # strict: raises if any surrogate survived


def test_json_safe_is_identity_on_valid_data_so_hashes_do_not_move():
    value = {"patch": {"description": "sch\u00e9ma \U0001F600", "actions": [{"n": 1, "x": 0.5, "ok": True}]},
             "seed": 0, "none": None}
    assert json_safe(value) == value
    assert canonical_sha256(json_safe(value)) == canonical_sha256(value)
    assert dumps(value) == json.dumps(value, ensure_ascii=False)


class Opaque:
    def __str__(self):
        return "opaque " + SURROGATE


def test_foreign_objects_become_strings_and_deep_nesting_is_cut():
    assert json_safe({"o": Opaque()}) == {"o": "opaque ?"}
    assert json.loads(dumps([Opaque()])) == ["opaque ?"]
    deep = []
    cursor = deep
    for _ in range(5000):  # deeper than json.dumps can recurse
        cursor.append([])
        cursor = cursor[0]
    text = dumps(deep)
    assert TOO_DEEP in text and json.loads(text)


def test_dumps_line_is_one_line():
    line = dumps_line({"text": "a\nb" + SURROGATE})
    assert line.endswith("\n") and line.count("\n") == 1
    assert json.loads(line) == {"text": "a\nb?"}


def test_write_jsonl_sanitises_the_bad_row_only(tmp_path):
    path = tmp_path / "rows.jsonl"
    rows = [{"i": 0, "t": "fine \u00e9"}, {"i": 1, "t": "bad " + SURROGATE}, {"i": 2, "t": "fine"}]
    write_jsonl(str(path), rows)
    lines = path.read_bytes().decode("utf-8").splitlines()  # strict UTF-8
    assert [json.loads(line) for line in lines] == [rows[0], {"i": 1, "t": "bad ?"}, rows[2]]


def test_a_failing_write_leaves_the_old_file_whole(tmp_path):
    path = tmp_path / "results.jsonl"
    write_jsonl(str(path), [{"i": 0}, {"i": 1}])

    def rows_then_crash():
        yield {"i": 9}
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_jsonl(str(path), rows_then_crash())
    assert path.read_text(encoding="utf-8") == '{"i": 0}\n{"i": 1}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["results.jsonl"]  # no temporary left behind


def test_write_json_round_trips_with_its_dump_options(tmp_path):
    path = tmp_path / "s.json"
    write_json(str(path), {"b": 1, "a": "x" + SURROGATE}, sort_keys=True)
    assert path.read_text(encoding="utf-8") == '{\n "a": "x?",\n "b": 1\n}'


def test_writes_make_missing_folders_and_reuse_existing_ones(tmp_path):
    path = tmp_path / "new" / "deeper" / "s.json"
    write_json(str(path), {"a": 1})           # folders missing: made
    write_jsonl(str(path.with_name("r.jsonl")), [{"i": 0}])   # folder there: written straight in
    assert json.loads(path.read_text(encoding="utf-8")) == {"a": 1}
    assert sorted(p.name for p in path.parent.iterdir()) == ["r.jsonl", "s.json"]
