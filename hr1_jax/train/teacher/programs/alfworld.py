"""ALFWorld teacher library: the full program, one marked block per failure-mode module.

Layout as in `dbbench.py`. HELPERS names the shared helper functions (`common.py`) emitted in front
of each hook, whichever modules are chosen.
"""
from hr1_jax.train.teacher.programs.common import closest, need_verb, text

# name: (on_init skill sentence, or "" for none; failure-pattern phrase for the <think> bullets)
MODULES = {
    "invalid_action": ("Only use actions exactly as they appear in the available actions list.",
                       "writes actions that are not in the admissible list"),
    "transform_first": ("For clean, heat or cool tasks, transform the object while carrying it before putting "
                        "it down.", "puts the target at the destination before the required transform"),
    "look_at_hold": ("", "uses the lamp without holding the object"),
    "pick_two": ("For two-object tasks, after placing the first object find another one and place it too.",
                 "stops after placing the first of two objects"),
    "take_target": ("", "walks past a visible target instead of taking it"),
    "action_loop": ("", "repeats the same action until the episode ends"),
}
HELPERS = {"on_post_step": (text,), "on_before_action": (text, closest, need_verb)}


def on_post_step(ctx, nb):
    p = ctx.get('predicates') or {}
    s = ctx.get('state') or {}
    w = ctx.get('world') or {}
    tt = text((ctx.get('task') or {}).get('task_type'))
    target = text((ctx.get('task') or {}).get('target_type'))
    inv = text(w.get('inventory'))
    inv_has = bool(target) and target in inv
    takes = [str(x) for x in ctx.get('admissible') or [] if text(x).startswith('take ' + target + ' ')]
    nb['take_cmd'] = takes[0] if takes else ''
    stage = 'working'
    # module: pick_two
    if 'two' in tt and (w.get('placed_count') or 0) == 1 and not inv_has:
        stage = 'second_object'
    # module: take_target
    if not inv_has and takes:
        stage = 'take_target'
    # module: action_loop
    if p.get('same_action_repeated') or p.get('nothing_happens_repeated'):
        stage = 'break_loop'
    # end
    nb['stage'] = stage
    return None


def make_pre_hint(ctx, nb):
    stage = nb.get('stage')
    msg = ''
    # module: pick_two
    if stage == 'second_object':
        msg = "One object is placed; find another one of the same type and put the second one there too."
    # module: take_target
    if stage == 'take_target':
        msg = 'The target is here: ' + str(nb.get('take_cmd')) + '.'
    # module: action_loop
    if stage == 'break_loop':
        msg = "You are stuck repeating an action; explore a different, unvisited location."
    # end
    if not msg or nb.get('last_hint') == msg:
        return None
    nb['last_hint'] = msg
    return {'message': msg}


def on_before_action(ctx, nb):
    a = ctx.get('action') or {}
    p = ctx.get('predicates') or {}
    s = ctx.get('state') or {}
    # module: invalid_action
    act = text(a.get('final_action') or a.get('raw'))
    adm = ctx.get('admissible') or []
    if act and adm and not a.get('in_admissible'):
        fix = closest(act, adm)
        if fix:
            return {'kind': 'rewrite_action', 'action': fix}
    # module: transform_first
    verb = need_verb(ctx)
    act = text(a.get('final_action'))
    done = (ctx.get('world') or {}).get('transformed') or {}
    if verb and act.startswith('put ') and not done:
        return {'kind': 'block_and_prompt', 'message': 'Do not put it down yet: ' + verb + ' the target first, then put it at the destination.'}
    # module: look_at_hold
    tt = text((ctx.get('task') or {}).get('task_type'))
    inv = text((ctx.get('world') or {}).get('inventory'))
    target = text((ctx.get('task') or {}).get('target_type'))
    if 'look_at' in tt and text(a.get('final_action')).startswith('use ') and target not in inv:
        return {'kind': 'block_and_prompt', 'message': 'Take and hold the ' + target + ' first, then use the lamp.'}
    # end
    return None
