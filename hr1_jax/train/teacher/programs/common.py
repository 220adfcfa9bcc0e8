"""Hook code every benchmark's teacher programs share: the on_init hook and the helper functions.

Real Python, read as text by the assembler (`programs/__init__.py`): a helper is emitted verbatim
in front of the hooks that list it; `on_init` is emitted with SKILLS replaced by the chosen
modules' skill sentences as one string literal. `SequenceMatcher` is the name the hook sandbox
provides (hr1_jax/patch/sandbox.py); here it is difflib's, so the helpers also run as plain code.
"""
from difflib import SequenceMatcher

SKILLS = ""


def on_init(ctx, nb):
    nb['stage'] = 'start'
    nb['last_hint'] = ''
    return {'skills': [{'text': SKILLS}]}


def text(x):
    if x is None:
        return ''
    if isinstance(x, (list, tuple)):
        return ' '.join([text(i) for i in x])
    return str(x).lower()


def closest(act, adm):
    best = ''
    score = 0.0
    for a in adm or []:
        r = SequenceMatcher(None, act, str(a).lower()).ratio()
        if r > score:
            best = str(a)
            score = r
    if score >= 0.75:
        return best
    return ''


def need_verb(ctx):
    tt = text((ctx.get('task') or {}).get('task_type'))
    for v in ['clean', 'heat', 'cool']:
        if v in tt:
            return v
    return ''


def pick_option(want, clickables):
    w = str(want or '').lower().strip()
    if not w:
        return ''
    for c in clickables or []:
        if str(c).lower().strip() == w:
            return str(c).lower().strip()
    return ''
