"""The template teacher's program library: stage-machine hook programs per benchmark.

A program is assembled from *modules*: each module is one failure mode the evidence can show
(e.g. DBBench "commits before running SQL", ALFWorld "puts the target before the transform",
WebShop "buys with required options unselected") and contributes a stage to the `on_post_step`
stage machine, a deduplicated soft hint to `make_pre_hint`, a narrow hard rule to
`on_before_action` and a sentence to the `on_init` skill. Which modules are on is decided from
the packet's runtime signals (`signals.py`). Written in the style of the reference's trained
patches (stage in `nb`, soft guidance first, hard interventions only for narrow evidence), in our
own code. Every line of every module is fixed text, so a tokenizer trained on these programs
holds common lines as single pieces and a small engineer can learn to emit them.
"""
from __future__ import annotations

import dataclasses
import json

from hr1_jax.data.rows import sft_assistant_text


@dataclasses.dataclass(frozen=True)
class Module:
    name: str
    skill: str = ""                 # sentence added to the on_init skill text
    stage_test: str = ""            # python condition (over p, s, nb, ctx) for on_post_step
    stage: str = ""                 # stage name set when stage_test holds
    hint: str = ""                  # make_pre_hint message for that stage
    hint_expr: str = ""             # or a python expression (over nb) building the message
    guard: str = ""                 # on_before_action body lines (return a block/rewrite or fall through)
    think: str = ""                 # failure-pattern phrase for the <think> bullets


# Helper functions (top-level defs; the sandbox allows at most 5 per hook).
HELPERS = {
    "text": (
        "def text(x):\n"
        "    if x is None:\n"
        "        return ''\n"
        "    if isinstance(x, (list, tuple)):\n"
        "        return ' '.join([text(i) for i in x])\n"
        "    return str(x).lower()\n"),
    "closest": (
        "def closest(act, adm):\n"
        "    best = ''\n"
        "    score = 0.0\n"
        "    for a in adm or []:\n"
        "        r = SequenceMatcher(None, act, str(a).lower()).ratio()\n"
        "        if r > score:\n"
        "            best = str(a)\n"
        "            score = r\n"
        "    if score >= 0.75:\n"
        "        return best\n"
        "    return ''\n"),
    "need_verb": (
        "def need_verb(ctx):\n"
        "    tt = text((ctx.get('task') or {}).get('task_type'))\n"
        "    for v in ['clean', 'heat', 'cool']:\n"
        "        if v in tt:\n"
        "            return v\n"
        "    return ''\n"),
    "pick_option": (
        "def pick_option(want, clickables):\n"
        "    w = str(want or '').lower().strip()\n"
        "    if not w:\n"
        "        return ''\n"
        "    for c in clickables or []:\n"
        "        if str(c).lower().strip() == w:\n"
        "            return str(c).lower().strip()\n"
        "    return ''\n"),
}

# ------------------------------------------------------------------------------------- DBBench
DBBENCH = (
    Module("commit_before_sql",
           skill="Run at least one SQL query before committing any answer.",
           guard=("    if a.get('tool') == 'commit_final_answer' and p.get('no_sql_yet'):\n"
                  "        return {'kind': 'block_and_prompt', 'message': 'Run at least one SQL query "
                  "to inspect or modify the database before committing.'}\n"),
           think="commits a final answer before executing any SQL"),
    Module("empty_commit",
           skill="Never commit an empty answer list for a question.",
           guard=("    if p.get('commit_empty_answer') and not p.get('mutation_task'):\n"
                  "        return {'kind': 'block_and_prompt', 'message': 'Do not commit an empty answer "
                  "list; commit the values your SQL returned.'}\n"),
           think="commits an empty answer list for SELECT questions"),
    Module("answer_format",
           skill="Commit the raw exact values from the SQL result, not a sentence describing them.",
           guard=("    if a.get('tool') == 'commit_final_answer' and not p.get('mutation_task'):\n"
                  "        for ans in a.get('answers') or []:\n"
                  "            if len(str(ans).split()) > 5 or 'answer is' in str(ans).lower():\n"
                  "                return {'kind': 'block_and_prompt', 'message': 'Commit only the exact "
                  "value in the requested answer shape, with no natural-language description.'}\n"),
           think="commits a descriptive sentence instead of the exact value"),
    Module("mutation_commit",
           skill="For INSERT, UPDATE or DELETE tasks execute the statement before committing.",
           stage_test="p.get('mutation_task') and p.get('mutation_not_attempted')",
           stage="mutation_needs_execution",
           hint="This is a data-changing task: execute the INSERT, UPDATE or DELETE statement before committing.",
           guard=("    if a.get('tool') == 'commit_final_answer' and p.get('mutation_task') and "
                  "p.get('mutation_not_attempted'):\n"
                  "        return {'kind': 'block_and_prompt', 'message': 'No INSERT, UPDATE or DELETE "
                  "has been executed yet; execute the mutation before committing.'}\n"),
           think="commits a data-changing task before executing the mutation"),
    Module("mutation_verify",
           stage_test="p.get('mutation_task') and s.get('mutation_attempted')",
           stage="verify_mutation",
           hint="An empty result [] after INSERT, UPDATE or DELETE can still mean success: verify with one "
                "SELECT, then commit.",
           think="reruns a mutation because it read the empty result as a failure"),
    Module("schema_probe",
           skill="After an unknown-column or syntax error, DESCRIBE the table and quote identifiers with backticks.",
           stage_test="p.get('unknown_column_error') or p.get('syntax_error') or 'exist' in str(s.get('last_error_text'))",
           stage="need_schema_probe",
           hint="Schema error: DESCRIBE the table and use the exact column names quoted with backticks.",
           think="guesses table or column names and keeps hitting SQL errors"),
    Module("query_loop",
           stage_test="p.get('repeated_sql')",
           stage="repeated_query_loop",
           hint="You repeated the same query; change the query instead of running it again.",
           think="reruns the same failing SQL in a loop"),
    Module("text_numeric",
           skill="Columns are TEXT: cast numeric-looking values (CAST(x AS DECIMAL)) before ranking, "
                 "comparing or aggregating.",
           think="ranks or compares numbers stored as TEXT lexicographically"),
)

# ------------------------------------------------------------------------------------ ALFWorld
ALFWORLD = (
    Module("invalid_action",
           skill="Only use actions exactly as they appear in the available actions list.",
           guard=("    act = text(a.get('final_action') or a.get('raw'))\n"
                  "    adm = ctx.get('admissible') or []\n"
                  "    if act and adm and not a.get('in_admissible'):\n"
                  "        fix = closest(act, adm)\n"
                  "        if fix:\n"
                  "            return {'kind': 'rewrite_action', 'action': fix}\n"),
           think="writes actions that are not in the admissible list"),
    Module("transform_first",
           skill="For clean, heat or cool tasks, transform the object while carrying it before putting it down.",
           guard=("    verb = need_verb(ctx)\n"
                  "    act = text(a.get('final_action'))\n"
                  "    done = (ctx.get('world') or {}).get('transformed') or {}\n"
                  "    if verb and act.startswith('put ') and not done:\n"
                  "        return {'kind': 'block_and_prompt', 'message': 'Do not put it down yet: ' + verb + "
                  "' the target first, then put it at the destination.'}\n"),
           think="puts the target at the destination before the required transform"),
    Module("look_at_hold",
           guard=("    tt = text((ctx.get('task') or {}).get('task_type'))\n"
                  "    inv = text((ctx.get('world') or {}).get('inventory'))\n"
                  "    target = text((ctx.get('task') or {}).get('target_type'))\n"
                  "    if 'look_at' in tt and text(a.get('final_action')).startswith('use ') and target not in inv:\n"
                  "        return {'kind': 'block_and_prompt', 'message': 'Take and hold the ' + target + "
                  "' first, then use the lamp.'}\n"),
           think="uses the lamp without holding the object"),
    Module("pick_two",
           skill="For two-object tasks, after placing the first object find another one and place it too.",
           stage_test="'two' in tt and (w.get('placed_count') or 0) == 1 and not inv_has",
           stage="second_object",
           hint="One object is placed; find another one of the same type and put the second one there too.",
           think="stops after placing the first of two objects"),
    Module("take_target",
           stage_test="not inv_has and takes",
           stage="take_target",
           hint_expr="'The target is here: ' + str(nb.get('take_cmd')) + '.'",
           think="walks past a visible target instead of taking it"),
    Module("action_loop",
           stage_test="p.get('same_action_repeated') or p.get('nothing_happens_repeated')",
           stage="break_loop",
           hint="You are stuck repeating an action; explore a different, unvisited location.",
           think="repeats the same action until the episode ends"),
)

# ------------------------------------------------------------------------------- WebShop (subst.)
WEBSHOP = (
    Module("careful_pick",
           skill="Open a product only if its title matches all key terms of the instruction and its price is "
                 "within the budget.",
           think="opens and buys products that do not match all key terms"),
    Module("options_before_buy",
           skill="Select every required option (color, size, etc.) before clicking buy now.",
           guard=("    if a.get('value_normalized') == 'buy now' and p.get('required_options_unselected'):\n"
                  "        t = ctx.get('task') or {}\n"
                  "        clk = s.get('clickables') or []\n"
                  "        for want in [t.get('required_color'), t.get('required_size')]:\n"
                  "            opt = pick_option(want, clk)\n"
                  "            if opt and opt not in text(nb.get('chosen')):\n"
                  "                nb['chosen'] = text(nb.get('chosen')) + ' ' + opt\n"
                  "                return {'kind': 'rewrite_action', 'action': 'click[' + opt + ']', "
                  "'message': 'Selecting the required option before buying.'}\n"
                  "        return {'kind': 'block_and_prompt', 'message': 'Select the required options that match "
                  "the instruction before buying. If no option matches, go back to search.'}\n"),
           think="clicks buy now with required options still unselected"),
    Module("budget",
           skill="Check the price against the budget before buying.",
           guard=("    if a.get('value_normalized') == 'buy now' and p.get('product_price_over_budget'):\n"
                  "        return {'kind': 'block_and_prompt', 'message': 'This product is over the budget; "
                  "go back to search and pick an in-budget item.'}\n"),
           think="buys products over the price limit"),
    Module("search_loop",
           stage_test="p.get('search_loop_detected') or p.get('duplicate_search_repeated')",
           stage="recover_search_loop",
           hint="You repeat the same search; stop searching, open the best matching product, select its options "
                "and click buy now.",
           think="repeats the same search instead of buying"),
)

LIBRARY = {"dbbench": DBBENCH, "alfworld": ALFWORLD, "webshop": WEBSHOP}


def module_names(benchmark: str) -> list[str]:
    return [m.name for m in LIBRARY[benchmark]]


# Every module's code is one self-contained block (independent `if`s, later blocks win), and each
# hook carries its benchmark's fixed helper set whenever it is present: a program is the library's
# blocks for the chosen modules in library order, which a small model can learn to compose.
POST_HELPERS = {"alfworld": ("text",)}
GUARD_HELPERS = {"alfworld": ("text", "closest", "need_verb"), "webshop": ("text", "pick_option")}


INIT_HEAD = ("def hook(ctx, nb):\n"
             "    nb['stage'] = 'start'\n"
             "    nb['last_hint'] = ''\n"
             "    return {'skills': [{'text': ")
INIT_TAIL = "}]}\n"
POST_HEAD = ("def hook(ctx, nb):\n"
             "    p = ctx.get('predicates') or {}\n"
             "    s = ctx.get('state') or {}\n")
POST_HEAD_EXTRA = {"alfworld": (
    "    w = ctx.get('world') or {}\n"
    "    tt = text((ctx.get('task') or {}).get('task_type'))\n"
    "    target = text((ctx.get('task') or {}).get('target_type'))\n"
    "    inv = text(w.get('inventory'))\n"
    "    inv_has = bool(target) and target in inv\n"
    "    takes = [str(x) for x in ctx.get('admissible') or [] if text(x).startswith('take ' + target + ' ')]\n"
    "    nb['take_cmd'] = takes[0] if takes else ''\n")}
POST_BODY = "    stage = 'working'\n"
POST_TAIL = "    nb['stage'] = stage\n    return None\n"
HINT_HEAD = "def hook(ctx, nb):\n    stage = nb.get('stage')\n    msg = ''\n"
HINT_TAIL = ("    if not msg or nb.get('last_hint') == msg:\n"
             "        return None\n"
             "    nb['last_hint'] = msg\n"
             "    return {'message': msg}\n")
GUARD_HEAD = ("def hook(ctx, nb):\n"
              "    a = ctx.get('action') or {}\n"
              "    p = ctx.get('predicates') or {}\n"
              "    s = ctx.get('state') or {}\n")
GUARD_TAIL = "    return None\n"


def _helpers(names) -> str:
    return "".join(HELPERS[n] + "\n" for n in names)


def _stage_block(m: Module) -> str:
    return f"    if {m.stage_test}:\n        stage = '{m.stage}'\n"


def _hint_block(m: Module) -> str:
    return f"    if stage == '{m.stage}':\n        msg = {m.hint_expr or json.dumps(m.hint)}\n"


def _on_init(benchmark: str, mods) -> str:
    return INIT_HEAD + json.dumps(" ".join(m.skill for m in mods if m.skill)) + INIT_TAIL


def _on_post_step(benchmark: str, mods) -> str:
    body = "".join(_stage_block(m) for m in mods if m.stage_test)
    return (_helpers(POST_HELPERS.get(benchmark, ())) + POST_HEAD + POST_HEAD_EXTRA.get(benchmark, "")
            + POST_BODY + body + POST_TAIL)


def _make_pre_hint(mods) -> str:
    return HINT_HEAD + "".join(_hint_block(m) for m in mods if m.stage_test) + HINT_TAIL


def _on_before_action(benchmark: str, mods) -> str:
    return (_helpers(GUARD_HELPERS.get(benchmark, ())) + GUARD_HEAD + "".join(m.guard for m in mods if m.guard)
            + GUARD_TAIL)


def code_blocks(benchmark: str) -> list[str]:
    """Every fixed piece of source the benchmark's programs are concatenated from (hook heads and
    tails, helper sets, one block per module and hook, skill sentences): the units a program is
    composed of, which the demo tokenizer keeps as single pieces."""
    mods = LIBRARY[benchmark]
    blocks = [INIT_HEAD, INIT_TAIL, POST_HEAD + POST_HEAD_EXTRA.get(benchmark, "") + POST_BODY, POST_TAIL,
              HINT_HEAD, HINT_TAIL, GUARD_HEAD, GUARD_TAIL, _helpers(POST_HELPERS.get(benchmark, ())),
              _helpers(GUARD_HELPERS.get(benchmark, ()))]
    blocks += [_stage_block(m) for m in mods if m.stage_test] + [_hint_block(m) for m in mods if m.stage_test]
    blocks += [m.guard for m in mods if m.guard] + [m.skill for m in mods if m.skill]
    return [b for b in blocks if b]


def build_patch(benchmark: str, names: list[str]) -> dict:
    """The patch for the chosen modules (in library order): on_init, on_post_step and make_pre_hint
    when any module keeps a stage, on_before_action when any module has a hard rule."""
    mods = [m for m in LIBRARY[benchmark] if m.name in set(names)]
    if not mods:
        raise ValueError(f"no modules chosen for {benchmark}")
    actions = [{"type": "add_code_hook", "hook": "on_init", "code": _on_init(benchmark, mods)}]
    if any(m.stage_test for m in mods):
        actions.append({"type": "add_code_hook", "hook": "on_post_step", "code": _on_post_step(benchmark, mods)})
        actions.append({"type": "add_code_hook", "hook": "make_pre_hint", "code": _make_pre_hint(mods)})
    if any(m.guard for m in mods):
        actions.append({"type": "add_code_hook", "hook": "on_before_action",
                        "code": _on_before_action(benchmark, mods)})
    desc = THINK_FIXED[8] + ", ".join(m.name.replace("_", " ") for m in mods) + "."
    return {"schema_version": "harness-r1-patch-v1", "benchmark": benchmark, "description": desc,
            "actions": actions}


THINK_FIXED = ("- Recurring failure in {benchmark}: the agent ", "- State in nb: ", "stage and last_hint only",
               "- Hooks: on_init states the workflow; ",
               "on_post_step tracks the stage and make_pre_hint gives one deduplicated hint per stage; ",
               "on_before_action enforces ", "no hard interventions",
               "- Regression risk: rules fire only on the narrow evidence above, so tasks the agent already "
               "solves are untouched.", "Stage-tracking harness for: ")


def think_bullets(benchmark: str, names: list[str]) -> str:
    """The four `<think>` bullets of the reference's quality contract."""
    mods = [m for m in LIBRARY[benchmark] if m.name in set(names)]
    stages = [m.stage for m in mods if m.stage]
    guards = [m.name.replace("_", " ") for m in mods if m.guard]
    return "\n".join([
        THINK_FIXED[0].format(benchmark=benchmark) + "; ".join(m.think for m in mods) + ".",
        THINK_FIXED[1] + (", ".join(["stage"] + stages) if stages else THINK_FIXED[2]) + ".",
        THINK_FIXED[3] + (THINK_FIXED[4] if stages else "")
        + (THINK_FIXED[5] + ", ".join(guards) if guards else THINK_FIXED[6]) + ".",
        THINK_FIXED[7],
    ])


def render_response(benchmark: str, names: list[str], protocol: str = "prefill_think_patch") -> str:
    """The engineer's response text under the response protocol (prefill: the continuation after
    the template's `<think>\\n`)."""
    return sft_assistant_text(think_bullets(benchmark, names), build_patch(benchmark, names), protocol)
