"""grain pipelines: benchmark-pure prompt groups with resumable iterator state, bucketed SFT batches
with prefill-protocol loss masks, and the per-host sharded rollout buffer."""
import numpy as np

from hr1_jax.models.tokenizer import SentencePieceTokenizer, train_sentencepiece
from hr1_jax.train.data import buffer_dataset, make_groups, rl_group_dataset, sft_dataset, sft_example


def _rows():
    rows = []
    for bench, n in (("dbbench", 7), ("alfworld", 3), ("webshop", 5)):
        rows += [{"prompt": [], "metadata": {"benchmark": bench, "i": i}} for i in range(n)]
    return rows


def test_groups_never_mix_benchmarks_and_cover_every_row():
    rows = _rows()
    groups = make_groups(rows, 4, seed=3)
    assert all(len(g) == 4 for g in groups)
    for g in groups:
        assert len({rows[i]["metadata"]["benchmark"] for i in g}) == 1
    assert {i for g in groups for i in g} == set(range(len(rows)))


def test_group_iterator_resumes_from_its_state():
    rows = _rows()
    ds = rl_group_dataset(rows, 2, seed=1)
    it = iter(ds.to_iter_dataset())
    for _ in range(5):
        next(it)
    state = it.get_state()
    want = [[r["metadata"]["i"] for r in next(it)] for _ in range(6)]   # crosses an epoch boundary
    it2 = iter(ds.to_iter_dataset())
    it2.set_state(state)
    assert [[r["metadata"]["i"] for r in next(it2)] for _ in range(6)] == want


def test_sft_examples_mask_only_the_continuation_and_bucket():
    texts = ["system prompt text", "user asks for a patch", "- bullet\n</think>\n<patch>{}</patch>"] * 5
    tok = SentencePieceTokenizer(train_sentencepiece(texts, vocab_size=300))
    msgs = [{"role": "system", "content": "system prompt text"}, {"role": "user", "content": "user asks"},
            {"role": "assistant", "content": "- bullet\n</think>\n<patch>{}</patch>"}]
    ex = sft_example(msgs, tok)
    assert tok.decode(ex["ids"][:ex["n_prompt"]]).endswith("<think>\n")
    ds, dropped = sft_dataset([ex] * 5, batch_size=2, buckets=(64, 128), pad_id=tok.pad_id, seed=0, epochs=2)
    assert dropped == 0 and len(ds) == 6
    b = ds[0]
    assert b["input_ids"].shape[1] in (64, 128) and b["loss_mask"].shape[1] == b["input_ids"].shape[1] - 1
    row = b["loss_mask"][0]
    n = len(ex["ids"])
    # targets ids[n_prompt .. n-1] are trained on, nothing before or after
    assert row[:ex["n_prompt"] - 1].sum() == 0 and row[ex["n_prompt"] - 1:n - 1].all() and row[n - 1:].sum() == 0
    assert tok.decode(ex["ids"][ex["n_prompt"]:]).startswith("- bullet")
    _, dropped = sft_dataset([ex], batch_size=1, buckets=(8,), pad_id=0, seed=0, epochs=1)
    assert dropped == 1


def test_buffer_shards_per_host_and_covers_the_buffer_once():
    items = list(range(16))
    seen = []
    for host in range(2):
        ds = buffer_dataset(items, minibatch=8, seed=5, collate=lambda xs: np.asarray(xs),
                            process_index=host, process_count=2)
        batches = list(ds)
        assert len(batches) == 2 and all(len(b) == 4 for b in batches)
        seen += [int(x) for b in batches for x in b]
    assert sorted(seen) == items
