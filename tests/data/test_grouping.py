"""The one grouping of rows (hr1_jax/data/rows.benchmark_groups): the grouped rows file and GRPO's
prompt groups keep their orders (pinned from before the two groupings became one), and each
benchmark's shuffle stream comes from its descriptor, derived from its name for a new one."""
import dataclasses
import random
import zlib

import pytest

from envs import registry
from hr1_jax.data.rows import benchmark_groups, group_rows
from hr1_jax.train.data import make_groups
from toy_benchmark import BENCHMARK as COUNTER


def _rows(bench, n):
    return [{"prompt": [], "metadata": {"benchmark": bench, "i": i}} for i in range(n)]


def _short(row):
    meta = row["metadata"]
    return (meta["benchmark"][0] + str(meta["i"]) + ("p" if meta.get("mixed_padded_duplicate") else "")
            + ("u" if meta.get("mixed_upsampled_duplicate") else ""))


def test_grouped_rows_keep_their_order():
    by_bench = {"alfworld": _rows("alfworld", 3), "webshop": _rows("webshop", 6), "dbbench": _rows("dbbench", 5)}
    out = group_rows(by_bench, 4, 7, group_counts={"webshop": 3})
    assert [_short(r) for r in out] == [
        "w1", "w2", "w5p", "w4p", "a1", "a2", "a0", "a0p", "w3u", "w4u", "w5u", "w0u",
        "w3", "w4", "w5", "w0", "d1", "d0", "d4", "d2", "d3", "d3p", "d3p", "d1p"]
    assert [r["metadata"]["mixed_group_index"] for r in out] == [g for g in range(6) for _ in range(4)]
    assert {r["metadata"]["mixed_group_benchmark"] for r in out[8:12]} == {"webshop"}
    assert by_bench["webshop"][0]["metadata"] == {"benchmark": "webshop", "i": 0}   # inputs untouched


def test_grpo_prompt_groups_keep_their_order():
    rows = _rows("dbbench", 7) + _rows("alfworld", 3) + _rows("webshop", 5)
    assert make_groups(rows, 4, seed=3) == [[8, 7, 9, 7], [6, 0, 4, 1], [3, 5, 2, 4], [14, 12, 10, 13],
                                            [11, 13, 11, 13]]


def test_tails_pad_drop_or_refuse():
    benches = ["b"] * 5
    assert [g.n_real for g in benchmark_groups(benches, 2, lambda b, k: random.Random(0))] == [2, 2, 1]
    assert [g.n_real for g in benchmark_groups(benches, 2, lambda b, k: random.Random(0), tail="drop")] == [2, 2]
    with pytest.raises(ValueError, match="do not fill groups of 2"):
        benchmark_groups(benches, 2, lambda b, k: random.Random(0), tail="error")
    with pytest.raises(ValueError, match="tail must be"):
        benchmark_groups(benches, 2, lambda b, k: random.Random(0), tail="wrap")


def test_shuffle_offsets_come_from_the_descriptors():
    assert {name: registry.benchmark(name).row_shuffle_offset() for name in ("alfworld", "webshop", "dbbench")} \
        == {"alfworld": 101, "webshop": 211, "dbbench": 401}
    assert COUNTER.shuffle_offset is None
    assert COUNTER.row_shuffle_offset() == zlib.crc32(b"counter") % 1000
    renamed = dataclasses.replace(COUNTER, name="counter2")
    assert renamed.row_shuffle_offset() != COUNTER.row_shuffle_offset()   # its own stream, from its name
    assert dataclasses.replace(COUNTER, shuffle_offset=5).row_shuffle_offset() == 5


def test_a_new_benchmark_groups_with_its_derived_stream():
    rows = _rows("counter", 9)
    with registry.registered("counter", "toy_benchmark:BENCHMARK"):
        out = group_rows({"counter": rows}, 3, seed=11)
    seed = 11 + zlib.crc32(b"counter") % 1000
    want = benchmark_groups(["counter"] * 9, 3, lambda b, k: random.Random(seed))
    random.Random(11).shuffle(want)
    assert [r["metadata"]["i"] for r in out] == [i for g in want for i in g.members]
    with pytest.raises(KeyError, match="unknown benchmark 'tau'"):
        group_rows({"tau": _rows("tau", 3)}, 3, seed=11)
