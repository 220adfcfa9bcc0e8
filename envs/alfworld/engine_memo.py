"""Work the TextWorld engine repeats in every ALFWorld reset and step, done once per process.

`install()` (idempotent, called before a game opens) memoises three things. None of them changes
what the engine says: tests/envs/test_alfworld_engine_memo.py plays the same episodes with and
without them and compares every observation, admissible list and reward.

* **PDDL -> SAS translation** (`fast_downward.pddl2sas`, a pure function of domain, problem and
  flags, returning text): TextWorld grounds every game four times per reset; with the memo a game
  is translated once per process, and a rerun of a recently played game (baseline, then patched)
  not at all.
* **Grammar parses.** TextWorld parses its text templates with TatSu at every use: each step derives
  every admissible action's command template and the feedback text from the game's grammar, and
  parses every rule condition it checks. Each parser's output (a TatSu model, which the engine only
  reads) is memoised per (text, options); the engine's converters still build fresh objects from it
  at every call, so nothing the engine changes is shared between calls.
* **Derivation contexts.** `textgen.copy_context` deep-copies a derivation's variables (the game's
  `EntityInfo` objects) and placeholder mapping for every symbol it derives. A copy of the two dicts
  (not of the objects in them) gives the same text whenever the grammar's `{expression}`s only read
  those objects, as every shipped grammar's do (`o.name`, `r.indefinite`, `r.name or r.id`, ...).
  Every expression parsed is checked first (`pure_read`); the first that is not a plain read turns
  this process back to deep copies. A grammar's rules are parsed when its game loads and a template
  when its derivation starts, so the switch always comes before such an expression is evaluated.

`benchmarks/bench_envs_alfworld.py --compare` times episodes with the memos against the engine with
the translation memo alone, in alternating processes. `HR1_ALFWORLD_ENGINE_MEMO=0` leaves the
parses and contexts to the engine (the comparison's baseline, or a check when debugging it).
"""
from __future__ import annotations

import ast
import functools
import logging
import os

log = logging.getLogger(__name__)

TRANSLATIONS = 64       # memoised PDDL translations: 2 per game (plain + optimised)
TEMPLATE_PARSES = 4096   # distinct grammar texts (rules, templates, conditions) per parser: ~120 for 40 games
DOCUMENT_PARSES = 32     # whole PDDL domain documents (one per game, large)
_PURE = (ast.Expression, ast.Name, ast.Attribute, ast.Constant, ast.Load, ast.BinOp, ast.Add,
         ast.BoolOp, ast.And, ast.Or)

_installed = False
_shallow_contexts = True


def install() -> None:
    """Install the memos (once per process); see the module docstring."""
    global _installed
    if _installed:
        return
    _install_translation_memo()
    if os.environ.get("HR1_ALFWORLD_ENGINE_MEMO", "1") != "0":
        _install_parse_memos()
    _installed = True


def pure_read(expression: str) -> bool:
    """Whether a grammar `{expression}` only reads: names, attributes, constants, `+`, `and`/`or`."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return False
    return all(isinstance(node, _PURE) for node in ast.walk(tree))


def shallow_contexts() -> bool:
    """Whether derivation contexts are still copied shallowly in this process."""
    return _shallow_contexts


def _install_translation_memo() -> None:
    import fast_downward
    original = fast_downward.pddl2sas

    @functools.lru_cache(maxsize=TRANSLATIONS)
    def cached(domain: str, problem: str, verbose: bool = False, optimize: bool = False):
        return original(domain, problem, verbose=verbose, optimize=optimize)

    def pddl2sas(domain, problem, verbose=False, optimize=False):
        return cached(domain, problem, bool(verbose), bool(optimize))

    pddl2sas.cache_info = cached.cache_info
    fast_downward.pddl2sas = pddl2sas


class MemoParser:
    """A TatSu parser whose `parse(text, **options)` results are memoised (`maxsize` most recent);
    `on_new(model)` sees each model parsed anew. Traced parses and non-text input are not memoised."""

    def __init__(self, parser, maxsize: int, on_new=None):
        self.parser, self.on_new = parser, on_new
        self._cached = functools.lru_cache(maxsize=maxsize)(self._parse_new)

    def _parse_new(self, text: str, options: tuple):
        model = self.parser.parse(text, **dict(options))
        if self.on_new is not None:
            self.on_new(model)
        return model

    def parse(self, text, **options):
        if not isinstance(text, str) or options.get("trace") \
                or not all(isinstance(v, (str, bool, int, type(None))) for v in options.values()):
            return self.parser.parse(text, **options)
        return self._cached(text, tuple(sorted(options.items())))

    def cache_info(self):
        return self._cached.cache_info()


def _install_parse_memos() -> None:
    import textworld.envs.pddl.logic as pddl_logic
    import textworld.envs.pddl.textgen as textgen
    import textworld.logic as logic
    targets = [(logic, "_PARSER"), (pddl_logic, "_PARSER"), (textgen, "_PARSER"), (textgen, "copy_context"),
               (textgen, "_Converter")]
    missing = [f"{m.__name__}.{name}" for m, name in targets if not hasattr(m, name)]
    if missing:   # another TextWorld than the pinned one: run it as it is, only slower
        log.warning("TextWorld lacks %s; ALFWorld runs without the parse and context memos", ", ".join(missing))
        return
    logic._PARSER = MemoParser(logic._PARSER, TEMPLATE_PARSES)
    pddl_logic._PARSER = MemoParser(pddl_logic._PARSER, DOCUMENT_PARSES)
    textgen._PARSER = MemoParser(textgen._PARSER, TEMPLATE_PARSES,
                                 on_new=lambda model: _check_expressions(textgen, model))
    deep_copy_context = textgen.copy_context

    def copy_context(context):
        if not _shallow_contexts:
            return deep_copy_context(context)
        return {"state": context["state"], "facts": context["facts"], "variables": dict(context["variables"]),
                "mapping": dict(context["mapping"]), "entity_infos": context["entity_infos"]}

    textgen.copy_context = copy_context


def _check_expressions(textgen, model) -> None:
    """Turn this process to deep context copies at the first expression in `model` that is not a read."""
    global _shallow_contexts
    if not _shallow_contexts:
        return
    for expression in _expressions(textgen, textgen._Converter().walk(model)):
        if not pure_read(expression):
            _shallow_contexts = False
            log.warning("ALFWorld grammar expression %r is not a plain read: derivation contexts are deep-copied "
                        "from now on in this process", expression)
            return


def _expressions(textgen, symbols):
    """The `{expression}` texts in converted grammar symbols (nested in conditions and lists too)."""
    todo = list(symbols) if isinstance(symbols, list) else [symbols]
    while todo:
        symbol = todo.pop()
        if isinstance(symbol, list):
            todo += symbol
        elif isinstance(symbol, textgen.EvalSymbol):
            yield symbol.expression
        elif isinstance(symbol, textgen.ConditionalSymbol):
            todo.append(symbol.expression)
        elif isinstance(symbol, textgen.ListSymbol):
            todo.append(symbol.symbol)
