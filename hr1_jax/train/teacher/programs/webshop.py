"""WebShop teacher library: the full program, one marked block per failure-mode module.

Layout as in `dbbench.py`; HELPERS as in `alfworld.py`.
"""
from hr1_jax.train.teacher.programs.common import pick_option, text

# name: (on_init skill sentence, or "" for none; failure-pattern phrase for the <think> bullets)
MODULES = {
    "careful_pick": ("Open a product only if its title matches all key terms of the instruction and its price "
                     "is within the budget.", "opens and buys products that do not match all key terms"),
    "options_before_buy": ("Select every required option (color, size, etc.) before clicking buy now.",
                           "clicks buy now with required options still unselected"),
    "budget": ("Check the price against the budget before buying.", "buys products over the price limit"),
    "search_loop": ("", "repeats the same search instead of buying"),
}
HELPERS = {"on_before_action": (text, pick_option)}


def on_post_step(ctx, nb):
    p = ctx.get('predicates') or {}
    s = ctx.get('state') or {}
    stage = 'working'
    # module: search_loop
    if p.get('search_loop_detected') or p.get('duplicate_search_repeated'):
        stage = 'recover_search_loop'
    # end
    nb['stage'] = stage
    return None


def make_pre_hint(ctx, nb):
    stage = nb.get('stage')
    msg = ''
    # module: search_loop
    if stage == 'recover_search_loop':
        msg = "You repeat the same search; stop searching, open the best matching product, select its options and click buy now."
    # end
    if not msg or nb.get('last_hint') == msg:
        return None
    nb['last_hint'] = msg
    return {'message': msg}


def on_before_action(ctx, nb):
    a = ctx.get('action') or {}
    p = ctx.get('predicates') or {}
    s = ctx.get('state') or {}
    # module: options_before_buy
    if a.get('value_normalized') == 'buy now' and p.get('required_options_unselected'):
        t = ctx.get('task') or {}
        clk = s.get('clickables') or []
        for want in [t.get('required_color'), t.get('required_size')]:
            opt = pick_option(want, clk)
            if opt and opt not in text(nb.get('chosen')):
                nb['chosen'] = text(nb.get('chosen')) + ' ' + opt
                return {'kind': 'rewrite_action', 'action': 'click[' + opt + ']', 'message': 'Selecting the required option before buying.'}
        return {'kind': 'block_and_prompt', 'message': 'Select the required options that match the instruction before buying. If no option matches, go back to search.'}
    # module: budget
    if a.get('value_normalized') == 'buy now' and p.get('product_price_over_budget'):
        return {'kind': 'block_and_prompt', 'message': 'This product is over the budget; go back to search and pick an in-budget item.'}
    # end
    return None
