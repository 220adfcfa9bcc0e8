"""The import direction of hr1_jax/ and envs/ (hr1_jax/__init__.py, design.md "Dependencies run one
way"), checked on the source: every import, including function-local ones and
`importlib.import_module("<literal>")`, is an edge; each rule names who may not import whom.

No break is allowed. Benchmark names are checked too: the code (not comments or docstrings) of
hr1_jax/ names a benchmark only in the CLI's help examples and the default benchmark of the config
(NAMING_ALLOWED); everything else asks the registry. `python tests/test_layering.py` prints the map.
"""
from __future__ import annotations

import ast
import collections
import dataclasses
import io
import re
import shutil
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("hr1_jax", "envs")
BENCHMARK_NAMES = ("alfworld", "dbbench", "webshop")


# ------------------------------------------------------------------------------------ the graph
def project_modules(root: Path) -> dict[str, Path]:
    """{dotted module name: file} for the packages under root."""
    out = {}
    for pkg in PACKAGES:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = f.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _imported(node: ast.AST, module: str, is_pkg: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: resolve against this module's package
            pkg = module.split(".") if is_pkg else module.split(".")[:-1]
            base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
        return [base] + [f"{base}.{a.name}" for a in node.names]
    func = node.func if isinstance(node, ast.Call) else None
    if (getattr(func, "attr", getattr(func, "id", None)) == "import_module"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return [node.args[0].value]
    return []


def imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """The project modules `module` imports (a `from pkg import name` is pkg.name when that is a
    module, else pkg)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names = _imported(node, module, path.name == "__init__.py")
        if isinstance(node, ast.ImportFrom) and names:
            base, subs = names[0], [n for n in names[1:] if n in known]
            names = subs + ([base] if len(subs) < len(names) - 1 else [])
        out |= {n for n in names if n in known and n != module}
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    mods = project_modules(root)
    return {m: imports_of(f, m, set(mods)) for m, f in mods.items()}


# ------------------------------------------------------------------------------------ the rules
def _under(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def is_cli(module: str) -> bool:
    return module.rsplit(".", 1)[-1] == "cli"


CONTRACT = ("envs.base", "envs.plugin")   # the Environment interface and the Benchmark descriptor


def is_benchmark_code(module: str) -> bool:
    """A benchmark's own folder, the helpers they share, or the registry (the list of them)."""
    return _under(module, "envs") and module != "envs" and module not in CONTRACT


LEARNER = ("hr1_jax.train", "hr1_jax.models", "hr1_jax.parallel")


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str
    applies: object   # module -> bool: the importers the rule is about
    forbids: object   # (importer, imported) -> bool


RULES = (
    Rule("the contract (envs/base.py, envs/plugin.py) and the error types are leaves",
         lambda m: m in (*CONTRACT, "hr1_jax.errors", "hr1_jax.utils.config_errors"), lambda m, t: True),
    Rule("the runtime knows no benchmark and no learner",
         lambda m: _under(m, "hr1_jax.runtime"),
         lambda m, t: is_benchmark_code(t) or _under(t, "hr1_jax.agents.scripted", *LEARNER)),
    Rule("benchmarks know nothing of training, models or who runs them (only envs/, utils, errors)",
         lambda m: _under(m, "envs"),
         lambda m, t: not _under(t, "envs", "hr1_jax.utils", "hr1_jax.errors")),
    Rule("benchmarks plug in through the registry: no code outside envs/ imports a benchmark's folder",
         lambda m: not _under(m, "envs"),
         lambda m, t: is_benchmark_code(t) and t != "envs.registry"),
    Rule("the reward (rollout/) knows nothing of the learner or the evaluation",
         lambda m: _under(m, "hr1_jax.rollout"), lambda m, t: _under(t, *LEARNER, "hr1_jax.eval")),
    # (envs.registry is not a benchmark: the patch layer's one way to a benchmark's envs.plugin.PatchSpec)
    Rule("the patch layer imports none of the layers that use it",
         lambda m: _under(m, "hr1_jax.patch"),
         lambda m, t: not _under(t, "hr1_jax.patch", "hr1_jax.config", "hr1_jax.utils", "hr1_jax.errors",
                                 "envs.registry")),
    Rule("the model knows nothing of harnesses or training",
         lambda m: _under(m, "hr1_jax.models", "hr1_jax.parallel"),
         lambda m, t: not _under(t, "hr1_jax.models", "hr1_jax.parallel", "hr1_jax.config", "hr1_jax.utils",
                                 "hr1_jax.errors")),
    Rule("only the GRPO learner imports its modules (SFT and evaluation share plumbing from elsewhere)",
         lambda m: _under(m, "hr1_jax.train") and not _under(m, "hr1_jax.train.grpo", "hr1_jax.train.grpo_step")
         and not is_cli(m) and m != "hr1_jax.train.demo",
         lambda m, t: _under(t, "hr1_jax.train.grpo", "hr1_jax.train.grpo_step")),
    Rule("no library module imports a CLI module",
         lambda m: not is_cli(m), lambda m, t: is_cli(t)),
)


def violations(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """{(importer, imported): [rule names it breaks]}."""
    out = collections.defaultdict(list)
    for mod, targets in graph.items():
        for rule in RULES:
            if rule.applies(mod):
                for t in sorted(targets):
                    if rule.forbids(mod, t):
                        out[(mod, t)].append(rule.name)
    return dict(out)


def test_imports_follow_the_layering():
    found = violations(import_graph(REPO))
    assert not found, "imports against the layering:\n" + "\n".join(f"  {a} -> {b}: {r}" for (a, b), r in found.items())


def _copy_tree(tmp_path: Path) -> Path:
    """The packages' Python files under tmp_path (the checker reads nothing else)."""
    for f in project_modules(REPO).values():
        dest = tmp_path / f.relative_to(REPO)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest)
    return tmp_path


def test_an_added_offending_import_is_caught(tmp_path):
    root = _copy_tree(tmp_path)
    base = violations(import_graph(root))
    assert base == violations(import_graph(REPO))
    # function-local, relative and importlib imports count like top-level ones
    (root / "hr1_jax/runtime/leak.py").write_text(
        "from importlib import import_module\n\ndef f():\n    from ..train import state\n"
        "    return import_module('envs.webshop.env')\n")
    (root / "envs/base.py").write_text((root / "envs/base.py").read_text() + "\nimport hr1_jax.errors\n")
    (root / "hr1_jax/rollout/reward.py").write_text(
        (root / "hr1_jax/rollout/reward.py").read_text() + "\n\ndef _late():\n    import hr1_jax.train.losses\n")
    (root / "hr1_jax/patch/leak.py").write_text("from hr1_jax.rollout import cli\n")
    # a benchmark's descriptor is reached through the registry, not imported
    (root / "hr1_jax/eval/leak.py").write_text("from envs.webshop import plugin\n")
    added = {k: v for k, v in violations(import_graph(root)).items() if k not in base}
    assert set(added) == {("hr1_jax.runtime.leak", "hr1_jax.train.state"),
                          ("hr1_jax.runtime.leak", "envs.webshop.env"),
                          ("envs.base", "hr1_jax.errors"),
                          ("hr1_jax.rollout.reward", "hr1_jax.train.losses"),
                          ("hr1_jax.patch.leak", "hr1_jax.rollout.cli"),
                          ("hr1_jax.eval.leak", "envs.webshop.plugin")}
    assert added[("hr1_jax.runtime.leak", "envs.webshop.env")] == [
        "the runtime knows no benchmark and no learner",
        "benchmarks plug in through the registry: no code outside envs/ imports a benchmark's folder"]
    assert added[("hr1_jax.patch.leak", "hr1_jax.rollout.cli")] == [
        "the patch layer imports none of the layers that use it", "no library module imports a CLI module"]


# ------------------------------------------------------------------- benchmark names in code
_BENCH_RE = re.compile("|".join(BENCHMARK_NAMES), re.I)


def _docstring_lines(tree: ast.Module) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines |= set(range(first.lineno, first.end_lineno + 1))
    return lines


def benchmark_mentions(source: str) -> int:
    """How many code tokens (names and string literals, not comments or docstrings) name a benchmark."""
    skip = _docstring_lines(ast.parse(source))
    count = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.NAME, tokenize.STRING) and tok.start[0] not in skip:
            count += len(_BENCH_RE.findall(tok.string))
        elif sys.version_info >= (3, 12) and tok.type == tokenize.FSTRING_MIDDLE:
            count += len(_BENCH_RE.findall(tok.string))
    return count


def benchmark_name_report(root: Path = REPO, package: str = "hr1_jax") -> dict[str, int]:
    """{file: mentions} for the files under `package` whose code names a benchmark."""
    out = {}
    for f in sorted((root / package).rglob("*.py")):
        n = benchmark_mentions(f.read_text(encoding="utf-8"))
        if n:
            out[str(f.relative_to(root))] = n
    return out


# The only hr1_jax/ files whose code may name a benchmark (help examples; the default benchmark).
NAMING_ALLOWED = {"hr1_jax/cli.py", "hr1_jax/config.py"}


def test_only_the_allowed_files_name_a_benchmark():
    named = set(benchmark_name_report())
    assert named <= NAMING_ALLOWED, f"code names a benchmark outside envs/ (ask envs.registry): {sorted(named - NAMING_ALLOWED)}"


def test_benchmark_mentions_count_code_only():
    src = ('"""A dbbench docstring."""\n# webshop comment\nimport envs.alfworld.env\n\n'
           'def f(b):\n    """alfworld."""\n    return {"dbbench": 1, "x": f"{b}-webshop"}.get(b)  # dbbench\n')
    assert benchmark_mentions(src) == 3


if __name__ == "__main__":
    report = benchmark_name_report()
    for path, n in sorted(report.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{n:5d}  {path}")
    print(f"{len(report)} files under hr1_jax/ name a benchmark in code ({sum(report.values())} mentions)")
