"""DBBench teacher library: the full program, one marked block per failure-mode module.

Each hook function is that hook of the program with every module on; a `# module: NAME` line
starts NAME's block and `# end` closes the last one (the assembler keeps the chosen blocks and
emits each hook as `def hook(ctx, nb):`). A module with an on_post_step block sets its stage there
and gives its hint in make_pre_hint; one with an on_before_action block is a hard rule.
"""

# name: (on_init skill sentence, or "" for none; failure-pattern phrase for the <think> bullets)
MODULES = {
    "commit_before_sql": ("Run at least one SQL query before committing any answer.",
                          "commits a final answer before executing any SQL"),
    "empty_commit": ("Never commit an empty answer list for a question.",
                     "commits an empty answer list for SELECT questions"),
    "answer_format": ("Commit the raw exact values from the SQL result, not a sentence describing them.",
                      "commits a descriptive sentence instead of the exact value"),
    "mutation_commit": ("For INSERT, UPDATE or DELETE tasks execute the statement before committing.",
                        "commits a data-changing task before executing the mutation"),
    "mutation_verify": ("", "reruns a mutation because it read the empty result as a failure"),
    "schema_probe": ("After an unknown-column or syntax error, DESCRIBE the table and quote identifiers with "
                     "backticks.", "guesses table or column names and keeps hitting SQL errors"),
    "query_loop": ("", "reruns the same failing SQL in a loop"),
    "text_numeric": ("Columns are TEXT: cast numeric-looking values (CAST(x AS DECIMAL)) before ranking, "
                     "comparing or aggregating.", "ranks or compares numbers stored as TEXT lexicographically"),
}
HELPERS = {}


def on_post_step(ctx, nb):
    p = ctx.get('predicates') or {}
    s = ctx.get('state') or {}
    stage = 'working'
    # module: mutation_commit
    if p.get('mutation_task') and p.get('mutation_not_attempted'):
        stage = 'mutation_needs_execution'
    # module: mutation_verify
    if p.get('mutation_task') and s.get('mutation_attempted'):
        stage = 'verify_mutation'
    # module: schema_probe
    if p.get('unknown_column_error') or p.get('syntax_error') or 'exist' in str(s.get('last_error_text')):
        stage = 'need_schema_probe'
    # module: query_loop
    if p.get('repeated_sql'):
        stage = 'repeated_query_loop'
    # end
    nb['stage'] = stage
    return None


def make_pre_hint(ctx, nb):
    stage = nb.get('stage')
    msg = ''
    # module: mutation_commit
    if stage == 'mutation_needs_execution':
        msg = "This is a data-changing task: execute the INSERT, UPDATE or DELETE statement before committing."
    # module: mutation_verify
    if stage == 'verify_mutation':
        msg = "An empty result [] after INSERT, UPDATE or DELETE can still mean success: verify with one SELECT, then commit."
    # module: schema_probe
    if stage == 'need_schema_probe':
        msg = "Schema error: DESCRIBE the table and use the exact column names quoted with backticks."
    # module: query_loop
    if stage == 'repeated_query_loop':
        msg = "You repeated the same query; change the query instead of running it again."
    # end
    if not msg or nb.get('last_hint') == msg:
        return None
    nb['last_hint'] = msg
    return {'message': msg}


def on_before_action(ctx, nb):
    a = ctx.get('action') or {}
    p = ctx.get('predicates') or {}
    s = ctx.get('state') or {}
    # module: commit_before_sql
    if a.get('tool') == 'commit_final_answer' and p.get('no_sql_yet'):
        return {'kind': 'block_and_prompt', 'message': 'Run at least one SQL query to inspect or modify the database before committing.'}
    # module: empty_commit
    if p.get('commit_empty_answer') and not p.get('mutation_task'):
        return {'kind': 'block_and_prompt', 'message': 'Do not commit an empty answer list; commit the values your SQL returned.'}
    # module: answer_format
    if a.get('tool') == 'commit_final_answer' and not p.get('mutation_task'):
        for ans in a.get('answers') or []:
            if len(str(ans).split()) > 5 or 'answer is' in str(ans).lower():
                return {'kind': 'block_and_prompt', 'message': 'Commit only the exact value in the requested answer shape, with no natural-language description.'}
    # module: mutation_commit
    if a.get('tool') == 'commit_final_answer' and p.get('mutation_task') and p.get('mutation_not_attempted'):
        return {'kind': 'block_and_prompt', 'message': 'No INSERT, UPDATE or DELETE has been executed yet; execute the mutation before committing.'}
    # end
    return None
