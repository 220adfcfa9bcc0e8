"""`canonical` takes fast paths for exact scalars and all-str-key dicts; they must give what the
general rule (spec §5.2) gives, or every stored identity and cache key would change."""
import enum
import json

import numpy as np

from envs.base import canonical, canonical_sha256


def general(value):
    """The rule without fast paths: dicts -> [str(key), value] pairs sorted by str(key)."""
    if isinstance(value, dict):
        return [[str(k), general(v)] for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))]
    if isinstance(value, (list, tuple)):
        return [general(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((general(v) for v in value), key=lambda v: json.dumps(v, separators=(",", ":"),
                                                                           ensure_ascii=False))
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


class Color(enum.IntEnum):
    RED = 1


class Key(str):
    def __str__(self):
        return "renamed-" + self


def test_fast_paths_match_the_general_rule():
    values = [
        {"b": 1, "a": [1, 2.5, None, True], "c": {"z": "x", "y": {"k": ()}}},
        {"10": 1, "9": 2, "": 3, "é": 4, "A": 5, "a": 6},          # string order, not numeric
        {1: "int key", "2": "str key", (3, 4): "tuple key", None: 0},  # mixed keys: general branch
        {Key("b"): 1, "a": 2},                                      # a str subclass's own str()
        {"x": Color.RED, "y": np.float64(0.5), "z": {3, 1, 2}, "w": frozenset({"q"})},
        [float("inf"), -0.0, 2**70, "\ud800"],
        "plain", 7, 1.5, False, None,
    ]
    for value in values:
        assert canonical(value) == general(value)
        assert json.dumps(canonical(value)) == json.dumps(general(value))


def test_pinned_digest():
    manifest = {"protocol": "hr1_task_manifest_v1", "benchmark": "dbbench", "task_id": 3, "seed": 0,
                "payload_sha256": "a" * 64, "extra": {"n": [1, 2, 3], "ok": True}}
    assert canonical_sha256(manifest) == "17cf108fafad3a12b6a97de8281c01fd90c296b1cefde84352702a177fa63b91"
