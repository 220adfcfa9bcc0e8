"""Work the TextWorld engine repeats in every ALFWorld reset and step, done once per process (or machine).

`install()` (idempotent, called before a game opens) memoises four things. None of them changes
what the engine says: tests/envs/test_alfworld_engine_memo.py plays the same episodes with and
without them and compares every observation, admissible list and reward.

* **PDDL -> SAS translation** (`fast_downward.pddl2sas`: the parsed task and its SAS text, a pure
  function of domain, problem and flags, the same in every process and hash seed): TextWorld grounds every game
  four times per reset; with the memo a game is translated once per process, and a rerun of a
  recently played game (baseline, then patched) not at all. The SAS text, most of a first reset, is
  also kept on disk (`translations_dir`: `<game root>/sas_cache`, or `$HR1_ALFWORLD_SAS_CACHE`; ""
  turns it off), one checksummed file per translation written atomically, so a game translated by
  one process (a rollout worker, an earlier run) is only parsed by the next; a folder that cannot
  be written leaves the memo in-process.
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
* **The initial state, built twice.** `PddlEnv.load` builds the game's initial `PddlState` (its task
  loaded into the fast-downward library, every fact read back from it) and `PddlEnv.reset`, which
  always follows, builds the same state again from the same problem, logic and library: most of a
  reset. The reset now takes the state the load built, which nothing can have changed (no action
  runs before a reset). The handover sits where `PddlEnv` calls `PddlState`: its module sees the
  logic module through `_LogicForPddlEnv`, which passes every other name through.

`benchmarks/bench_envs_alfworld.py --compare` times episodes with the memos against the engine with
the in-process translation memo alone, in fresh processes. `HR1_ALFWORLD_ENGINE_MEMO=0` leaves the
parses, contexts and the translation folder to the engine (the comparison's baseline, or a check
when debugging it).
"""
from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import io
import json
import logging
import os
import sys
import tempfile
import zlib
from importlib import metadata
from pathlib import Path

log = logging.getLogger(__name__)

TRANSLATIONS = 64       # memoised PDDL translations: 2 per game (plain + optimised)
TEMPLATE_PARSES = 4096   # distinct grammar texts (rules, templates, conditions) per parser: ~120 for 40 games
DOCUMENT_PARSES = 32     # whole PDDL domain documents (one per game, large)
_PURE = (ast.Expression, ast.Name, ast.Attribute, ast.Constant, ast.Load, ast.BinOp, ast.Add,
         ast.BoolOp, ast.And, ast.Or)

_installed = False        # the translation memo (in every process)
_memos_installed = False  # the rest (not under HR1_ALFWORLD_ENGINE_MEMO=0)
_shallow_contexts = True
translations = {"translated": 0, "from_disk": 0}   # this process's PDDL translations, by where they came from
initial_states = {"reused": 0}   # resets that took the state their game's load built


def install(translations_dir: str | Path | None = None) -> None:
    """Install the memos (once per process; the first call's folder counts; the memos other than the
    translation's at the first call without HR1_ALFWORLD_ENGINE_MEMO=0); see the module docstring."""
    global _installed, _memos_installed
    on = os.environ.get("HR1_ALFWORLD_ENGINE_MEMO", "1") != "0"
    if not _installed:
        folder = os.environ.get("HR1_ALFWORLD_SAS_CACHE", str(translations_dir or ""))
        _install_translation_memo(_writable(folder) if on and folder else None)
        _installed = True
    if on and not _memos_installed:
        _install_parse_memos()
        _install_initial_state_handover()
        _memos_installed = True


def _writable(folder: str) -> Path | None:
    try:
        os.makedirs(folder, exist_ok=True)
        if os.access(folder, os.W_OK):
            return Path(folder)
    except OSError:
        pass
    log.warning("ALFWorld translation cache %s cannot be written; translations stay in this process", folder)
    return None


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


def _install_translation_memo(folder: Path | None) -> None:
    import fast_downward
    original = fast_downward.pddl2sas
    try:   # part of every stored translation's key: another translator's text is another file
        version = metadata.version("fast_downward_textworld")
    except metadata.PackageNotFoundError:
        folder = None

    @functools.lru_cache(maxsize=TRANSLATIONS)
    def cached(domain: str, problem: str, verbose: bool = False, optimize: bool = False):
        if folder is None or verbose:
            translations["translated"] += 1
            return original(domain, problem, verbose=verbose, optimize=optimize)
        key = json.dumps([version, domain, problem, optimize])
        path = folder / f"{hashlib.sha256(key.encode()).hexdigest()}.sas.z"
        sas = read_sas(path)
        if sas is not None:
            translations["from_disk"] += 1
            return parse_task(domain, problem), sas
        task, sas = original(domain, problem, verbose=verbose, optimize=optimize)
        translations["translated"] += 1
        write_sas(path, sas)
        return task, sas

    def pddl2sas(domain, problem, verbose=False, optimize=False):
        return cached(domain, problem, bool(verbose), bool(optimize))

    pddl2sas.cache_info = cached.cache_info
    fast_downward.pddl2sas = pddl2sas


def parse_task(domain: str, problem: str):
    """The task `fast_downward.pddl2sas` returns beside the SAS text: the PDDL parsed and normalised
    (which reads no translator option; the translation proper leaves the task as it is)."""
    sys.argv = ["translate.py", "domain", "task"]   # as pddl2sas: the translator's options module parses it
    from fast_downward.translate import normalize
    from fast_downward.translate.pddl_parser import lisp_parser, parsing_functions
    with contextlib.redirect_stdout(io.StringIO()):
        task = parsing_functions.parse_task(lisp_parser.parse_nested_list(domain.split("\n")),
                                            lisp_parser.parse_nested_list(problem.split("\n")))
        normalize.normalize(task)
    return task


_SAS_HEADER = b"hr1-sas zlib sha256="


def read_sas(path: Path) -> str | None:
    """The SAS text stored at `path`, or None where it is missing or does not match its checksum."""
    try:
        header, _, packed = path.read_bytes().partition(b"\n")
        sas = zlib.decompress(packed).decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, zlib.error, UnicodeDecodeError):
        sas = None
    if sas is None or header != _SAS_HEADER + hashlib.sha256(sas.encode()).hexdigest().encode():
        log.warning("ALFWorld translation cache file %s is damaged; translating again", path)
        return None
    return sas


def write_sas(path: Path, sas: str) -> None:
    """Store `sas` at `path`, zlib-compressed, atomically (a reader sees the whole
    file or none); a failed write only leaves this translation uncached."""
    data = _SAS_HEADER + hashlib.sha256(sas.encode()).hexdigest().encode() + b"\n" + zlib.compress(sas.encode(), 6)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".sas-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        log.warning("ALFWorld translation cache: could not write %s (%s)", path, e)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


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


class _LogicForPddlEnv:
    """`textworld.envs.pddl.logic` as `textworld.envs.pddl.pddl` sees it: every name passed through,
    and `PddlState` handing a reset the state its game's load built (see the module docstring)."""

    def __init__(self, module):
        self._module = module
        # id(library copy) -> (the copy, the state its game's load built); holding the copy keeps its id its own
        self._loaded: dict[int, tuple] = {}

    def __getattr__(self, name):
        return getattr(self._module, name)

    def loaded(self, state) -> None:
        self._loaded[id(state.downward_lib)] = (state.downward_lib, state)

    def PddlState(self, downward_lib, pddl_problem, logic):
        _, state = self._loaded.pop(id(downward_lib), (None, None))
        if state is not None and state.pddl_problem is pddl_problem and state._logic is logic:
            initial_states["reused"] += 1
            return state
        return self._module.PddlState(downward_lib, pddl_problem, logic)


def _install_initial_state_handover() -> None:
    from textworld.envs.pddl import pddl
    if not all(hasattr(pddl, name) for name in ("pddl_logic", "PddlEnv")):
        log.warning("TextWorld's PDDL env differs from the pinned one; ALFWorld resets build their state anew")
        return
    logic = _LogicForPddlEnv(pddl.pddl_logic)
    load = pddl.PddlEnv.load

    def load_and_keep(env, *args, **kwargs):
        load(env, *args, **kwargs)
        logic.loaded(env._pddl_state)

    pddl.pddl_logic = logic
    pddl.PddlEnv.load = load_and_keep
