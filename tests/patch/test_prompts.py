"""Engineer prompt texts carry every contract of reference spec §1.6 for the three multihook styles."""
import hashlib

import pytest

from envs import registry
from hr1_jax.patch import (EVIDENCE_MARKER, PatchError, schema_prompt, schema_style, system_prompt,
                           user_prompt_prefix)

STAGES = {
    "webshop": ["search_query", "inspect_results", "inspect_product", "select_options", "budget_check", "buy",
                "recover_search_loop"],
    "alfworld": ["find_target", "take_target", "transform", "go_destination", "put_target", "wrong_inventory"],
    "dbbench": ["need_schema_probe", "fixing_unknown_column", "fixing_empty_result", "mutation_needs_execution",
                "ready_to_commit_candidate", "repeated_query_loop"],
}
FIELDS = {
    "webshop": ["value_normalized", "required_options_unselected", "product_price_over_budget", "clickables",
                "selected_attributes", "price_max"],
    "alfworld": ["admissible", "placed_count", "target_type", "destination_type", "nothing_happens_repeated",
                 "inventory"],
    "dbbench": ["last_error_kind", "mutation_not_attempted", "commit_before_sql", "discovered_columns",
                "sql_history", "candidate_answer"],
}


@pytest.mark.parametrize("bench", ["webshop", "alfworld", "dbbench"])
@pytest.mark.parametrize("protocol", ["prefill_think_patch", "full_think_patch"])
def test_schema_prompt_contracts(bench, protocol):
    text = schema_prompt(bench, protocol, schema_style(bench))
    for heading in ("Output contract", "Top-level contract", "Hook-count contract", "Grammar", "Return contracts",
                    "Design target", "Think contract", "Variables available", "Code rules", "Rules"):
        assert heading in text, heading
    for hook in ("on_init", "make_pre_hint", "on_before_action", "on_post_step"):
        assert hook in text
    assert f'"{bench}"' in text and "add_code_hook" in text and "9000" in text and "8000" in text
    assert "exactly 4 short bullets" in text and 'nb["last_hint"]' in text
    assert ("between 1 and 4" if bench == "webshop" else "between 2 and 4") in text
    for word in STAGES[bench] + FIELDS[bench]:
        assert word in text, word
    if protocol == "full_think_patch":
        assert "two XML-style blocks" in text
    else:
        assert "exactly one <patch>...</patch> block" in text


@pytest.mark.parametrize("bench", ["webshop", "alfworld", "dbbench"])
def test_user_prefix_layout(bench):
    prefill = user_prompt_prefix(bench, "prefill_think_patch")
    full = user_prompt_prefix(bench, "full_think_patch")
    assert prefill.endswith("\n\n" + EVIDENCE_MARKER) and full.endswith(EVIDENCE_MARKER)
    assert "already opened your <think>" in prefill and "already opened" not in full
    assert prefill.count(EVIDENCE_MARKER) == 1
    assert ("DBBench Runtime Context" in prefill) == (bench == "dbbench")
    assert prefill.split("\n\n")[0].startswith("Change only the reusable")
    system = system_prompt(bench, "prefill_think_patch")
    assert "harness engineer" in system and "<patch>" in system
    assert "<think>" in system_prompt(bench, "full_think_patch")


def test_dbbench_runtime_context_contents():
    text = user_prompt_prefix("dbbench", "prefill_think_patch")
    for s in ("execute_sql(query)", "commit_final_answer(answers)", 'no ctx["world"]', "final database state",
              "empty result"):
        assert s in text


def test_bad_arguments():
    with pytest.raises(PatchError):
        schema_prompt("webshop", "prefill_think_patch", "dbbench_life_multihook_v1")
    with pytest.raises(PatchError):
        schema_prompt("mind2web", "prefill_think_patch")
    with pytest.raises(PatchError):
        system_prompt("webshop", "json_patch")


# sha256 prefixes of the system prompts and user prefixes of both protocols, from the texts as they
# were before they moved into envs/<benchmark>/patch_spec.py: the move changed no byte.
PINNED = {"webshop": "73272339f776c8c3", "alfworld": "812df4648f87c562", "dbbench": "14e2ca44ed044759"}


@pytest.mark.parametrize("bench", sorted(PINNED))
def test_prompts_are_pinned(bench):
    h = hashlib.sha256()
    for protocol in ("full_think_patch", "prefill_think_patch"):
        h.update(system_prompt(bench, protocol).encode())
        h.update(user_prompt_prefix(bench, protocol).encode())
    assert h.hexdigest()[:16] == PINNED[bench]


def test_a_benchmark_without_prompt_texts_gets_the_generic_sections():
    with registry.registered("counter", "toy_benchmark:BENCHMARK"):
        assert schema_style("counter") == "counter_life_multihook_v1"
        system = system_prompt("counter", "full_think_patch")
        text = user_prompt_prefix("counter", "prefill_think_patch")
    assert system.startswith("You are a Harness-R1 harness engineer. You receive failed Counter agent traces")
    assert text.split("\n\n")[0].startswith("Change only the reusable Counter harness")
    assert '"benchmark": exactly "counter"' in text and "between 2 and 4" in text and text.endswith(EVIDENCE_MARKER)
    for heading in ("Return contracts", "Design target", "Variables available", "Rules\n- No task indices"):
        assert heading in text, heading
    for other in ("WebShop", "ALFWorld", "DBBench", "Runtime Context"):
        assert other not in text + system


def test_a_benchmarks_own_sections_come_from_its_descriptor():
    with registry.registered("ruled", "ruled_benchmark:BENCHMARK"):
        text = user_prompt_prefix("ruled", "full_think_patch")
        assert "failed Counter slot-game traces" in system_prompt("ruled", "full_think_patch")
    assert text.endswith("Ruled Runtime Context\n- Slots are numbered per game.\n\n" + EVIDENCE_MARKER)
