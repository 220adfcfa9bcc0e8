"""Engineer prompt texts carry every contract of reference spec §1.6 for the three multihook styles."""
import pytest

from hr1_jax.patch import (EVIDENCE_MARKER, PatchError, SCHEMA_STYLES, schema_prompt, system_prompt,
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
    text = schema_prompt(bench, protocol, SCHEMA_STYLES[bench])
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
