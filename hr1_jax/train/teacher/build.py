"""Teacher rows -> SFT rows, filtered by real reruns (reference §7 cold start).

For every RL row the teacher proposes candidate responses; all candidates are scored together with
the paired-rerun reward (identical patches for one batch are rerun once). A row yields an SFT row
only from its best candidate that is a valid patch, whose full rerun completed (no `eval_failed`),
and whose delta is >= `min_delta`.
"""
from __future__ import annotations

from hr1_jax.rollout.reward import OK, RewardContext, score_group
from hr1_jax.train.teacher.endpoint import EndpointTeacher
from hr1_jax.train.teacher.template import TemplateTeacher
from hr1_jax.utils.logging import log_event
from hr1_jax.utils.progress import map_in_chunks, progress


def make_teacher(section):
    """`config.train.teacher` -> a teacher object with `.responses(row) -> [(label, text)]`."""
    if section.kind == "endpoint":
        return EndpointTeacher.from_config(section)
    return TemplateTeacher(max_candidates=section.candidates)


KEEP = ("best", "all")


def build_sft_rows(rows: list[dict], teacher, ctx: RewardContext, *, min_delta: float = 0.0, keep: str = "best"
                   ) -> tuple[list[dict], dict]:
    """Returns (SFT rows, stats). Each SFT row: {"messages": prompt + assistant, "metadata": {...}}."""
    if keep not in KEEP:
        raise ValueError(f"keep must be one of {KEEP}, got {keep!r}")
    flat_rows, flat_texts, owners = [], [], []
    many = getattr(teacher, "responses_many", None)  # an endpoint teacher asks for several rows at once
    candidates = many(rows) if many else [teacher.responses(row) for row in
                                          progress(rows, desc="teacher: write candidates", unit="row")]
    for i, (row, responses) in enumerate(zip(rows, candidates)):
        for label, text in responses:
            flat_rows.append(row)
            flat_texts.append(text)
            owners.append((i, label))
    # Chunks of the reruns score_group runs at once, two in flight: the pool never drains, the bar moves.
    results = map_in_chunks(lambda part: score_group([r for r, _ in part], [t for _, t in part], ctx),
                            list(zip(flat_rows, flat_texts)), chunk=4 * ctx.pool.num_workers, in_flight=2,
                            desc="teacher: rerun candidates", unit="patch") if flat_rows else []
    chosen: dict[int, list[tuple[float, str, str, object]]] = {}
    stats = {"rows": len(rows), "candidates": len(flat_rows), "invalid": 0, "eval_failed": 0,
             "negative": 0, "kept": 0}
    for (i, label), text, res in zip(owners, flat_texts, results):
        if res.eval_status != OK:
            stats["eval_failed" if res.excluded else "invalid"] += 1
            continue
        if res.score < min_delta:
            stats["negative"] += 1
            continue
        chosen.setdefault(i, []).append((res.score, label, text, res))
    out = []
    stats["variants"] = {}
    for i in sorted(chosen):
        cands = chosen[i] if keep == "all" else [max(chosen[i], key=lambda c: c[0])]
        for score, label, text, res in cands:
            row = rows[i]
            meta = dict(row.get("metadata") or {}, teacher=teacher.name, teacher_variant=label,
                        teacher_score=score, teacher_delta_pass_rate=res.delta_pass_rate)
            out.append({"messages": list(row["prompt"]) + [{"role": "assistant", "content": text}],
                        "metadata": meta})
            stats["variants"][label] = stats["variants"].get(label, 0) + 1
    stats["kept"] = len(out)
    stats["rows_kept"] = len(chosen)
    log_event("teacher", "sft_rows", **stats)
    return out, stats
