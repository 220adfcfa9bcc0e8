"""Static validation and compilation of hook source (reference spec §3.1), plus our AST rewrite.

`compile_hook(code, benchmark)` applies the reference checks exactly (top-level defs only,
one `hook(ctx, nb)`, at most 5 helpers, at most 1200 AST nodes, forbidden node types / names /
attributes / underscore access, string literals at most 700 chars, literals matching the
benchmark's numbered-instance action pattern `PatchSpec.instance_action_re`) and additionally
rejects attribute names that reach frames or code objects
(`gi_frame`, `f_back`, `tb_frame`, `co_code`, `mro`, ...), which the reference leaves open, and
attribute assignment (everything a hook can name outside its locals is shared).

The pass that checks the tree (`_Pass`, one traversal) also rewrites it so that size-changing
operations go through the guards of `guards.py` (`a * b` -> `_g_mul(a, b)`, f-strings ->
`_g_fstr([...])`, `s.join` -> `_g_call(s, 'join', xs)`, ...), and statement ticks (`_g_tick`, `_g_iter`, `_g_enter`/`_g_exit`)
are inserted for the deterministic line and depth budgets. The inserted names start with `_`,
which hook source may not use, so hooks cannot reach or rebind them. Any failure to parse,
rewrite or compile (also RecursionError/MemoryError on deeply nested source) is a
HookCompileError.
"""
from __future__ import annotations

import ast
import functools
import gc
import os
import re

from envs import registry
from hr1_jax.patch import guards, specs
from hr1_jax.patch.errors import HookCompileError

HOOK_FILENAME = "<hr1-hook>"
MAX_HOOK_SOURCE_CHARS = 8000
MAX_HOOK_AST_NODES = 1200
MAX_HOOK_STR_CHARS = 700
MAX_HELPER_FUNCTIONS = 5
MAX_HOOK_AST_DEPTH = 200      # ours (as the tokenizer's bracket nesting); shipped hooks nest <= 16

SAFE_BUILTIN_NAMES = frozenset({
    "abs", "all", "any", "bool", "dict", "enumerate", "Exception", "filter", "float", "int",
    "isinstance", "len", "list", "map", "max", "min", "range", "reversed", "round", "set",
    "sorted", "str", "sum", "tuple", "zip",
})
MODULE_GLOBALS = frozenset({"math", "re", "SequenceMatcher"})
FORBIDDEN_NAMES = frozenset({
    "breakpoint", "classmethod", "compile", "delattr", "dir", "eval", "exec", "exit", "getattr",
    "globals", "help", "input", "locals", "memoryview", "object", "open", "property", "quit",
    "setattr", "staticmethod", "super", "type", "vars", "__import__",
})
FORBIDDEN_NODES = (
    ast.AsyncFunctionDef, ast.Await, ast.ClassDef, ast.Delete, ast.Global, ast.Import,
    ast.ImportFrom, ast.Lambda, ast.Nonlocal, ast.Raise, ast.With, ast.AsyncWith, ast.While,
    ast.Yield, ast.YieldFrom,
) + ((ast.TryStar,) if hasattr(ast, "TryStar") else ())
# Beyond the reference: attributes of frames, generators, coroutines, tracebacks and code
# objects (`(x for x in y).gi_frame.f_back.f_globals` escapes without any underscore), `mro`
# (reaches `object`), the Match attributes `re` / `expand` (a raw Pattern or template
# expansion would bypass the size guards of the `re` stand-in) and `to_bytes` (`(0).to_bytes(n)`
# allocates n bytes in one C call and `from_bytes` builds an int past the size cap, `expandf` is
# the `regex` package's unguarded template expansion, `pattern`/`scanner` reach a raw regex
# object (no timeout, no caps) from `re.finditer`'s iterator).
FORBIDDEN_ATTR_RE = re.compile(r"^(?:gi|cr|ag|f|tb|co)_|^(?:mro|re|pattern|scanner|expand|expandf|to_bytes|from_bytes)$")


def _fail(code: str, message: str):
    raise HookCompileError(code, message)


def _check_signature(func: ast.FunctionDef, *, is_hook: bool) -> None:
    if func.decorator_list:
        _fail("bad_signature", "decorators are not allowed")
    if func.returns is not None:
        _fail("bad_signature", "return annotations are not allowed")
    args = func.args
    if is_hook:
        if args.posonlyargs or args.vararg or args.kwonlyargs or args.kw_defaults or args.kwarg or args.defaults:
            _fail("bad_signature", "hook signature may use only plain positional arguments")
        if [a.arg for a in args.args] != ["ctx", "nb"]:
            _fail("bad_signature", "hook signature must be exactly hook(ctx, nb)")
    every = list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    seen = set()
    for a in every:
        if a.arg in seen:
            _fail("bad_signature", f"duplicate argument name: {a.arg}")
        seen.add(a.arg)
        if a.arg.startswith("_") or a.arg in FORBIDDEN_NAMES:
            _fail("forbidden_name", f"helper argument uses forbidden name: {a.arg}")
        if a.annotation is not None:
            _fail("bad_signature", "argument annotations are not allowed")
    if not is_hook:
        for d in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
            if not (isinstance(d, ast.Constant) and isinstance(d.value, (str, int, float, bool, type(None)))):
                _fail("bad_signature", "helper defaults may only be simple scalar constants")


def _check_try(node: ast.Try) -> None:
    if node.orelse or node.finalbody:
        _fail("bad_try", "try/except may not use else or finally")
    if not node.handlers:
        _fail("bad_try", "try must catch Exception explicitly")
    for h in node.handlers:
        if not (isinstance(h.type, ast.Name) and h.type.id == "Exception"):
            _fail("bad_try", "try/except may only use except Exception")
        if h.name and (h.name.startswith("_") or h.name in FORBIDDEN_NAMES):
            _fail("forbidden_name", f"exception alias uses forbidden name: {h.name}")


_CHILD_FIELDS: dict = {}


def _child_fields(t: type) -> tuple:
    """Fields of a node type that can hold child nodes (`ctx` markers are skipped)."""
    fields = _CHILD_FIELDS.get(t)
    if fields is None:
        fields = _CHILD_FIELDS[t] = tuple(f for f in t._fields if f != "ctx")
    return fields


def _nodes(root: ast.AST) -> list:
    """Every node under root, breadth first, without the `ctx` markers (the reference's order of
    the checks). Trees deeper than MAX_HOOK_AST_DEPTH are rejected: the rewrite and the compiler
    recurse once per level."""
    out, start, depth = [root], 0, 0
    append, AST = out.append, ast.AST
    while start < len(out):
        depth += 1
        if depth > MAX_HOOK_AST_DEPTH:
            _fail("hook_too_complex", f"hook code is nested more than {MAX_HOOK_AST_DEPTH} levels deep")
        end = len(out)
        for node in out[start:end]:
            for field in _CHILD_FIELDS.get(type(node)) or _child_fields(type(node)):
                value = getattr(node, field, None)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, AST):
                            append(item)
                elif isinstance(value, AST):
                    append(value)
        start = end
    return out


def _parse(source) -> tuple[ast.Module, list]:
    """Parse hook source and apply the checks of its top level (only functions, one hook, the
    helpers' names, every signature); returns the tree and its functions."""
    if not isinstance(source, str) or not source.strip():
        _fail("hook_empty", "hook code must be a non-empty string")
    if len(source) > MAX_HOOK_SOURCE_CHARS:
        _fail("hook_too_long", f"hook code exceeds {MAX_HOOK_SOURCE_CHARS} characters")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as e:  # ValueError: NUL bytes
        _fail("hook_syntax", f"hook code has invalid syntax: {e}")
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(funcs) != len(tree.body):
        _fail("top_level", "hook code may contain only top-level function definitions")
    hooks = [f for f in funcs if f.name == "hook"]
    if len(hooks) != 1:
        _fail("hook_count", "hook code must contain exactly one top-level hook function")
    helpers = [f for f in funcs if f.name != "hook"]
    if len(helpers) > MAX_HELPER_FUNCTIONS:
        _fail("too_many_helpers", f"hook code may contain at most {MAX_HELPER_FUNCTIONS} helper functions")
    names = set()
    for h in helpers:
        if h.name.startswith("_") or h.name in FORBIDDEN_NAMES:
            _fail("forbidden_name", f"helper function uses forbidden name: {h.name}")
        if h.name in SAFE_BUILTIN_NAMES or h.name in MODULE_GLOBALS:
            _fail("forbidden_name", f"helper function shadows reserved name: {h.name}")
        if h.name in names:
            _fail("duplicate_helper", f"duplicate helper function: {h.name}")
        names.add(h.name)
    _check_signature(hooks[0], is_hook=True)
    for h in helpers:
        _check_signature(h, is_hook=False)
    return tree, funcs


def _check_in_order(funcs: list, instance_rule: tuple | None) -> None:
    """The node checks in the reference's order: nesting depth, node count, then every node
    breadth first. Run only once the one-pass check-and-rewrite (`_Pass`, depth first) has
    failed, so that a hook breaking several rules gets the verdict the reference gives it."""
    per_func = [_nodes(f) for f in funcs]
    # ast.walk's count (the reference's cap): the module, every node, and every ctx marker.
    count = 1 + sum(len(ns) + sum(1 for n in ns if type(n) in _CTX_TYPES) for ns in per_func)
    if count > MAX_HOOK_AST_NODES:
        _fail("too_many_nodes", f"hook AST exceeds {MAX_HOOK_AST_NODES} nodes")
    for func, nodes in zip(funcs, per_func):
        for node in nodes:
            check = _NODE_CHECKS.get(type(node))
            if check is not None:
                check(node, func, instance_rule)


_CTX_TYPES = frozenset({ast.Name, ast.Attribute, ast.Subscript, ast.Starred, ast.List, ast.Tuple})


def _instance_rule(benchmark: str) -> tuple | None:
    """(pattern, error code, message) of the benchmark's numbered-instance literal rule, or None."""
    return _instance_rule_of(benchmark, os.environ.get(registry.EXTRA_ENV, ""))


@functools.lru_cache(maxsize=32)
def _instance_rule_of(benchmark: str, extra: str) -> tuple | None:
    # Keyed on the registry's extra registrations, its only varying part: a registry lookup
    # (import, descriptor) per hook cost as much as the checks of a short hook.
    spec = specs.spec(benchmark)
    if spec is None or spec.instance_action_re is None:
        return None
    title = specs.descriptor(benchmark).report.title
    return (spec.instance_action_re, f"{benchmark}_instance_leak",
            f"hook must not hard-code numbered {title} instance actions")


def _check_name(node: ast.Name, func, instance_rule) -> None:
    if node.id.startswith("_") or node.id in FORBIDDEN_NAMES:
        _fail("forbidden_name", f"hook uses forbidden name: {node.id}")


def _check_forbidden(node: ast.AST, func, instance_rule) -> None:
    _fail("forbidden_syntax", f"hook uses forbidden syntax: {type(node).__name__}")


def _check_function(node: ast.FunctionDef, func: ast.FunctionDef, instance_rule) -> None:
    if node is not func:
        _fail("nested_function", "nested functions are not allowed")


def _check_try_node(node: ast.Try, func, instance_rule) -> None:
    _check_try(node)


def _check_attribute(node: ast.Attribute, func, instance_rule) -> None:
    if not isinstance(node.ctx, ast.Load):
        # `math.pi = 0`, `hook.cache = {}`: every object a hook can name outside its own
        # locals is shared with other hooks, patches or episodes of the process.
        _fail("attribute_assignment", f"hooks may not assign or delete attributes ({node.attr})")
    if node.attr.startswith("_") or node.attr in FORBIDDEN_NAMES or FORBIDDEN_ATTR_RE.search(node.attr):
        _fail("forbidden_attribute", f"hook uses forbidden attribute: {node.attr}")


_DIGIT = re.compile(r"\d")  # a PatchSpec.instance_action_re matches only text with a digit


def _check_constant(node: ast.Constant, func, instance_rule: tuple | None) -> None:
    if isinstance(node.value, str):
        if len(node.value) > MAX_HOOK_STR_CHARS:
            _fail("string_too_long", "hook string literal is too long")
        if instance_rule and _DIGIT.search(node.value) and instance_rule[0].search(" ".join(node.value.lower().split())):
            _fail(instance_rule[1], instance_rule[2])


# The check of each node type that has one, by exact type (the parser makes no subclasses).
_NODE_CHECKS = {ast.Name: _check_name, ast.FunctionDef: _check_function, ast.Try: _check_try_node,
                ast.Attribute: _check_attribute, ast.Constant: _check_constant,
                **{t: _check_forbidden for t in FORBIDDEN_NODES}}


def _recursive_functions(calls: dict) -> set:
    """Names of the top-level functions that may run nested in themselves, from `calls` (each
    function's directly called top-level names). A hook function is reached only by its name
    (no globals, attributes, closures or function defaults), so unless a name is used as a
    value (passed to `map`, `sorted(key=)`, `re.sub`, stored; the caller then counts every
    function), the calls at run time follow these direct calls and only functions on a cycle
    can recurse."""
    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for nxt in calls[todo.pop()] - seen:
                if nxt == goal:
                    return True
                seen.add(nxt)
                todo.append(nxt)
        return False

    return {name for name in calls if reaches(name, name)}


# --------------------------------------------------------------------------- AST rewrite

_AST, _NAME, _CONSTANT, _LOAD_CTX = ast.AST, ast.Name, ast.Constant, ast.Load  # one global lookup each
_CALL, _EXPR = ast.Call, ast.Expr
_BINOP_GUARDS = {ast.Add: "_g_add", ast.Mult: "_g_mul", ast.Pow: "_g_pow", ast.LShift: "_g_lshift",
                 ast.Mod: "_g_mod"}
_AUG_GUARDS = {ast.Add: "_g_iadd", ast.Mult: "_g_imul", ast.Pow: "_g_pow", ast.LShift: "_g_lshift",
               ast.Mod: "_g_imod"}


_LOAD = ast.Load()


def _pos(ref: ast.AST) -> dict:
    return {"lineno": ref.lineno, "col_offset": ref.col_offset, "end_lineno": ref.end_lineno,
            "end_col_offset": ref.end_col_offset}


def _call(ref: ast.AST, name: str, *args: ast.expr) -> ast.Call:
    """`name(*args)` placed at ref's source position, as are the new nodes among args (the
    rewrite locates every node it makes, so no `fix_missing_locations` pass is needed)."""
    return _call_at(_pos(ref), name, args)


# The rewrite's nodes are made without the ast types' __init__ and get their fields and their
# position in their __dict__ directly: the generic __init__ cost twice as much, and the rewrite
# makes some 450 nodes for the slowest shipped patch.
_new = ast.AST.__new__


def _at(node: ast.AST, pos: dict) -> ast.AST:
    node.__dict__.update(pos)
    return node


def _name_at(pos: dict, ident: str) -> ast.Name:
    node = _new(_NAME)
    d = node.__dict__
    d.update(pos)
    d["id"], d["ctx"] = ident, _LOAD
    return node


def _call_at(pos: dict, name: str, args) -> ast.Call:
    for arg in args:
        if not hasattr(arg, "lineno"):
            _at(arg, pos)
    node = _new(_CALL)
    d = node.__dict__
    d.update(pos)
    d["func"], d["args"], d["keywords"] = _name_at(pos, name), list(args), []
    return node


def _stmt_at(pos: dict, call: ast.Call) -> ast.Expr:
    node = _new(_EXPR)
    d = node.__dict__
    d.update(pos)
    d["value"] = call
    return node


def _tick(ref: ast.stmt, n: int) -> ast.Expr:
    """`_g_tick(n)` at ref's position: the tick of a statement list of n statements (the
    rewrite's most common insertion: its nodes are built here in one go)."""
    pos = _pos(ref)
    count, name, call, stmt = _new(_CONSTANT), _new(_NAME), _new(_CALL), _new(_EXPR)
    count.__dict__ = {**pos, "value": n}
    name.__dict__ = {**pos, "id": "_g_tick", "ctx": _LOAD}
    call.__dict__ = {**pos, "func": name, "args": [count], "keywords": []}
    stmt.__dict__ = {**pos, "value": call}
    return stmt


def _as_load(target: ast.expr) -> ast.expr:
    if isinstance(target, ast.Name):
        return ast.Name(id=target.id, ctx=ast.Load())
    if isinstance(target, ast.Subscript):
        return ast.Subscript(value=target.value, slice=target.slice, ctx=ast.Load())
    if isinstance(target, ast.Attribute):
        return ast.Attribute(value=target.value, attr=target.attr, ctx=ast.Load())
    raise HookCompileError("hook_syntax", "unsupported augmented assignment target")


def _is_safe_replace(node: ast.Call) -> bool:
    """`s.replace('x', 'y')` with literal args that cannot grow s needs no guard (hot in hooks)."""
    a = node.args
    return (len(a) == 2 and not node.keywords and all(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in a)
            and 1 <= len(a[0].value) and len(a[1].value) <= len(a[0].value))


def _is_type_name(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in guards.TYPE_NAMES


# `isinstance(x, list)` with the real type: the stand-ins' metaclass check is a Python call per
# isinstance (a third of the ALFWorld reference hook's guard cost). Exact while the hook binds
# neither name itself (helpers cannot shadow builtins; `_Pass.bound` has every bound name).
_REAL_TYPES = {"str": "_g_t_str", "int": "_g_t_int", "list": "_g_t_list", "tuple": "_g_t_tuple",
               "set": "_g_t_set", "dict": "_g_t_dict"}


_BODY_FIELDS = ("body", "orelse", "finalbody")


def _subclasses(cls: type):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


# Node types with statement lists (If, For, Try, ExceptHandler, match_case, ...), Module aside,
# and their statement-list fields.
_BODY_FIELDS_OF = {c: tuple(f for f in _BODY_FIELDS if f in c._fields) for c in _subclasses(ast.AST)
                   if c is not ast.Module and any(f in getattr(c, "_fields", ()) for f in _BODY_FIELDS)}


def _real_types(bound: set) -> dict:
    return {} if "isinstance" in bound else {k: v for k, v in _REAL_TYPES.items() if k not in bound}


class _Pass:
    """One depth-first traversal of a parsed hook that checks every node (`_NODE_CHECKS`, the
    nesting depth, the node count), gathers what the rewrite depends on (every name the hook
    binds, the direct calls between its functions) and rewrites the tree bottom-up: (1) it
    routes size-changing operations through the guards of `guards.py` and (2) puts statement
    ticks (`_g_tick(n)`) at the head of every statement list of the hook's functions and
    `_g_iter` around every comprehension iterable: the deterministic line budget. Functions that
    may recurse also count their call depth (`_g_enter`/`_g_exit`), added once all are seen.

    The rewrite of `isinstance(x, T)` / `str(x)` assumes the bound names `assumed`; `run`
    returns False when the hook binds others (rare: the caller reruns on a fresh tree with them).
    It stops at its first failure, depth first: the caller then asks `_check_in_order` for
    the verdict of the reference's order."""

    def __init__(self, funcs: list, instance_rule: tuple | None, assumed: set):
        self.funcs, self.instance_rule = funcs, instance_rule
        self.real_types = _real_types(assumed)
        self.top_names = {f.name for f in funcs}
        self.bound = set(self.top_names)
        self.count = 1  # the module
        self.callees: set = set()   # ids of Name callees (a direct call of a hook function)
        self.keep: set = set()      # ids of method callees rewritten with their Call (`_g_call`)
        self.escaped = False        # a hook function's name used as a value

    def run(self) -> bool:
        calls = {}
        for func in self.funcs:
            self.func, self.used = func, set()
            self.walk(func, 1)  # a FunctionDef: no Name, Constant or bare node
            calls[func.name] = self.used
        if self.count > MAX_HOOK_AST_NODES:
            _fail("too_many_nodes", f"hook AST exceeds {MAX_HOOK_AST_NODES} nodes")
        if _real_types(self.bound) != self.real_types:
            return False
        recursive = set(calls) if self.escaped else _recursive_functions(calls)
        for func in self.funcs:
            if func.name in recursive:
                _count_depth(func)
        return True

    def walk(self, node, depth: int):
        """Check, gather and rewrite `node` (at nesting level `depth`, neither a Name, a Constant
        nor a node without fields: those, the most common, are handled in their parent's loop)
        and its subtree; returns the node that replaces it."""
        count, check, gather, singles, lists, body_fields, rewrite = _PLANS.get(type(node)) or _plan(type(node))
        if check is not None:
            check(node, self.func, self.instance_rule)
        if gather is not None:
            gather(self, node)
        if depth >= MAX_HOOK_AST_DEPTH:  # its children would be too deep
            _check_no_children(node, singles + lists)
        depth += 1
        fields = node.__dict__  # a parsed node holds every field there
        # Leaves are handled inline in both loops below, on purpose: the pass visits every node,
        # and a function call per leaf cost more than the repetition (measured in de5bd24).
        for field in singles:
            item = fields[field]
            t = type(item)
            if t is _NAME:
                count += self.name(item)
            elif t is _CONSTANT:
                if type(item.value) is str:
                    _check_constant(item, self.func, self.instance_rule)
                count += 1
            elif t in _BARE:
                count += 1
            elif isinstance(item, _AST):  # else None (an optional field)
                new = self.walk(item, depth)
                if new is not item:
                    fields[field] = new
        for field in lists:
            value = fields[field]
            if type(value) is not list:
                continue  # a field of unknown shape (see `_field_shapes`) holding no list
            for i, item in enumerate(value):
                t = type(item)
                if t is _NAME:
                    count += self.name(item)
                elif t is _CONSTANT:
                    if type(item.value) is str:
                        _check_constant(item, self.func, self.instance_rule)
                    count += 1
                elif t in _BARE:
                    count += 1
                elif isinstance(item, _AST):  # else None (a `**` entry's key in a Dict)
                    new = self.walk(item, depth)
                    if new is not item:
                        value[i] = new
        self.count += count
        for field in body_fields:
            stmts = fields[field]  # a list, or an IfExp's expressions
            if type(stmts) is list and stmts and isinstance(stmts[0], _STMT):
                header = 1 if field == "body" and type(node) is ast.For else 0  # re-run per item
                stmts.insert(0, _tick(stmts[0], len(stmts) + header))
        return node if rewrite is None else rewrite(self, node)

    def name(self, item) -> int:
        """Check and gather a Name; returns its count (with its ctx marker)."""
        ident = item.id
        if ident[0] == "_" or ident in FORBIDDEN_NAMES:
            _fail("forbidden_name", f"hook uses forbidden name: {ident}")
        if type(item.ctx) is not _LOAD_CTX:
            self.bound.add(ident)
        elif ident in self.top_names:
            self.used.add(ident)
            if id(item) not in self.callees:
                self.escaped = True
        return 2

    # --- facts -------------------------------------------------------------------------------
    def gather_call(self, node):
        f = node.func
        if type(f) is ast.Name:
            self.callees.add(id(f))
        elif type(f) is ast.Attribute and f.attr in guards.SIZE_GUARDED_ATTRS and not _is_type_name(f.value):
            self.keep.add(id(f))

    def gather_arg(self, node):
        self.bound.add(node.arg)

    def gather_handler(self, node):
        if node.name:
            self.bound.add(node.name)

    # --- guards (each on a node whose children are rewritten already) -------------------------
    def _real_type(self, node: ast.expr) -> ast.expr | None:
        """`node` (a type name or a tuple of them) with the real builtin types, or None."""
        if isinstance(node, ast.Name) and node.id in self.real_types:
            return ast.copy_location(ast.Name(id=self.real_types[node.id], ctx=ast.Load()), node)
        if isinstance(node, ast.Tuple) and node.elts:
            elts = [self._real_type(e) for e in node.elts]
            if all(e is not None for e in elts):
                return ast.copy_location(ast.Tuple(elts=elts, ctx=ast.Load()), node)
        return None

    def comprehension(self, node):
        node.iter = _call(node.iter, "_g_iter", node.iter)
        return node

    def BinOp(self, node):
        name = _BINOP_GUARDS.get(type(node.op))
        if not name:
            return node
        if isinstance(node.op, ast.Add) and (isinstance(node.left, ast.Constant) or isinstance(node.right, ast.Constant)):
            return node  # a literal operand (<= 700 chars) only grows the result linearly per line
        return _call(node, name, node.left, node.right)

    def AugAssign(self, node):
        name = _AUG_GUARDS.get(type(node.op))
        if not name or (isinstance(node.op, ast.Add) and isinstance(node.value, ast.Constant)):
            return node  # `n += 1`, `s += '.'`: linear growth per line, left native
        value = _call(node, name, _as_load(node.target), node.value)
        return ast.copy_location(ast.Assign(targets=[node.target], value=value), node)

    def Attribute(self, node):
        if id(node) in self.keep:
            return node  # the callee of a `_g_call`: see `Call`
        if isinstance(node.ctx, ast.Load) and (
                node.attr in guards.SIZE_GUARDED_ATTRS
                or (node.attr in guards.TYPE_GUARDED_ATTRS and _is_type_name(node.value))):
            return _call(node, "_g_attr", node.value, ast.Constant(node.attr))
        return node

    def Call(self, node):
        f = node.func
        if type(f) is ast.Name and f.id == "isinstance" and len(node.args) == 2 and not node.keywords:
            real = self._real_type(node.args[1])
            if real is not None:
                node.args[1] = real
                return node
        if type(f) is ast.Name and f.id == "str" and "str" in self.real_types:
            node.func = ast.Name(id="_g_str", ctx=_LOAD, **_pos(f))  # what the stand-in would call
        if id(f) in self.keep and not (f.attr == "replace" and _is_safe_replace(node)):
            # obj.join(xs) -> _g_call(obj, 'join', xs): one checked call, no bound-method wrapper.
            keywords = node.keywords
            node = _call(node, "_g_call", f.value, ast.Constant(f.attr), *node.args)
            node.keywords = keywords
        for kw in node.keywords:
            if kw.arg is None:
                kw.value = _call(kw.value, "_g_star", kw.value)
        return node

    def JoinedStr(self, node):
        # f-string -> _g_fstr([parts]): the total length is checked before the parts are joined.
        return _call(node, "_g_fstr", ast.List(elts=node.values, ctx=ast.Load()))

    def FormattedValue(self, node):
        spec = node.format_spec if node.format_spec is not None else ast.Constant("")
        return _call(node, "_g_fv", node.value, ast.Constant(node.conversion), spec)

    def Starred(self, node):
        if isinstance(node.ctx, ast.Load):
            node.value = _call(node, "_g_star", node.value)
        return node

    def Dict(self, node):
        node.values = [_call(v, "_g_star", v) if k is None else v for k, v in zip(node.keys, node.values)]
        return node


_REWRITES = {t: getattr(_Pass, t.__name__) for t in (
    ast.comprehension, ast.BinOp, ast.AugAssign, ast.Attribute, ast.Call, ast.JoinedStr, ast.FormattedValue,
    ast.Starred, ast.Dict)}


_GATHERS = {ast.Call: _Pass.gather_call, ast.arg: _Pass.gather_arg, ast.ExceptHandler: _Pass.gather_handler}
# Node types without fields (operators, contexts, Pass, ...): counted, nothing to check or rewrite.
_BARE = frozenset(c for c in _subclasses(ast.AST) if not getattr(c, "_fields", None)
                  and c not in _NODE_CHECKS and c not in _REWRITES and c not in _BODY_FIELDS_OF)
_STMT = ast.stmt
_PLANS: dict = {}


def _plan(t: type) -> tuple:
    """What `_Pass.walk` does with a node of type t: its count (with a ctx marker and its
    operator), its check, its facts, its single and list child fields, its statement-list
    fields, its rewrite."""
    singles, lists, ops = _field_shapes(t)
    plan = _PLANS[t] = ((2 if t in _CTX_TYPES else 1) + ops, _NODE_CHECKS.get(t), _GATHERS.get(t), singles, lists,
                        _BODY_FIELDS_OF.get(t, ()), _REWRITES.get(t))
    return plan


_ASDL_FIELD = re.compile(r"(\w+)([*?]?) (\w+)$")
_SCALAR_KINDS = frozenset({"identifier", "string", "int", "constant"})  # names, flags, a Constant's value
_OP_KINDS = frozenset({"operator", "boolop", "unaryop"})  # one field-less node each, nothing to check


def _field_shapes(t: type) -> tuple[tuple, tuple, int]:
    """(single child fields, list child fields, operator fields) of node type t, from its ASDL
    signature, the type's docstring (`BinOp(expr left, operator op, expr right)`): the pass
    skips the scalar fields and only counts the operators. A field the signature does not
    describe is in both tuples, where the walk checks its shape."""
    doc = (t.__doc__ or "").strip()
    head, _, rest = doc.partition("(")
    kinds = {}
    if head == t.__name__ and rest.endswith(")"):
        for part in rest[:-1].split(","):
            m = _ASDL_FIELD.match(part.strip())
            if m:
                kinds[m.group(3)] = (m.group(1), m.group(2))
    singles, lists, ops = [], [], 0
    for field in _child_fields(t):
        kind, shape = kinds.get(field, ("", ""))
        if kind in _SCALAR_KINDS:
            continue
        if kind in _OP_KINDS and shape == "":
            ops += 1
        elif shape == "*":
            lists.append(field)
        elif kind:
            singles.append(field)
        else:
            singles.append(field)
            lists.append(field)
    return tuple(singles), tuple(lists), ops


def _check_no_children(node: ast.AST, fields: tuple) -> None:
    for field in fields:
        value = getattr(node, field, None)
        if isinstance(value, _AST) or (type(value) is list and any(isinstance(v, _AST) for v in value)):
            _fail("hook_too_complex", f"hook code is nested more than {MAX_HOOK_AST_DEPTH} levels deep")


def _count_depth(func: ast.FunctionDef) -> None:
    # def f(..): _g_enter(n); try: <body> finally: _g_exit() -- depth counted in the budget,
    # so runaway recursion stops with a signal `except Exception` cannot catch.
    n = func.body[0].value.args[0].value  # the tick the pass put first
    pos = _pos(func)
    func.body = [_stmt_at(pos, _call_at(pos, "_g_enter", (ast.Constant(n),))),
                 ast.copy_location(ast.Try(body=func.body[1:], handlers=[], orelse=[],
                                           finalbody=[_stmt_at(pos, _call_at(pos, "_g_exit", ()))]), func)]


_GUARD_GLOBALS = {
    "_g_add": guards.g_add, "_g_iadd": guards.g_iadd, "_g_mul": guards.g_mul,
    "_g_imul": guards.g_imul, "_g_pow": guards.g_pow, "_g_lshift": guards.g_lshift,
    "_g_mod": guards.g_mod, "_g_imod": guards.g_imod, "_g_attr": guards.g_attr, "_g_call": guards.g_call,
    "_g_fv": guards.g_fv, "_g_fstr": guards.g_fstr, "_g_star": guards.g_star,
    "_g_tick": guards.g_tick, "_g_iter": guards.g_iter, "_g_enter": guards.g_enter, "_g_exit": guards.g_exit,
    "_g_str": guards.g_str,
    "_g_t_str": str, "_g_t_int": int, "_g_t_list": list, "_g_t_tuple": tuple, "_g_t_set": set, "_g_t_dict": dict,
}


def _safe_builtins() -> dict:
    import builtins
    out = {name: getattr(builtins, name) for name in SAFE_BUILTIN_NAMES}
    out.update(str=guards.SafeStr, int=guards.SafeInt, list=guards.SafeList, tuple=guards.SafeTuple, set=guards.SafeSet,
               dict=guards.SafeDict, sorted=guards.g_sorted, zip=guards.g_zip, range=guards.g_range,
               round=guards.g_round, sum=guards.g_sum)
    return out


SAFE_BUILTINS = _safe_builtins()


def compile_hook(code: str, benchmark: str | None = None):
    """Validate, rewrite and compile hook source; returns the `hook(ctx, nb)` function.
    Raises HookCompileError. Run the result through `run_hook` / `CompiledPatch.call`.
    Results are cached: a compiled hook holds no state of its own (hooks cannot write globals,
    attributes or defaults), so validation and installation can share one compile."""
    if not isinstance(code, str):
        _fail("hook_empty", "hook code must be a non-empty string")
    return _compile_cached(code, (benchmark or "").lower())


def _check_and_rewrite(source: str, benchmark: str) -> ast.Module:
    """The checked and rewritten tree of hook source (raises HookCompileError)."""
    tree, funcs = _parse(source)
    instance_rule = _instance_rule(benchmark)
    try:
        first = _Pass(funcs, instance_rule, set())
        if not first.run():  # the hook binds a builtin type's name: rewrite with it bound
            tree, funcs = _parse(source)
            _Pass(funcs, instance_rule, first.bound).run()
    except Exception:
        _check_in_order(_parse(source)[1], instance_rule)  # a hook breaking several rules
        raise
    return tree


@functools.lru_cache(maxsize=512)
def _compile_cached(code: str, benchmark: str):
    # No collections while the trees are built and dropped: they hold no cycles, and each
    # collection would only walk their thousands of nodes again (~5% of a validation).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _compile(code, benchmark)
    finally:
        if enabled:
            gc.enable()


def _compile(code: str, benchmark: str):
    try:
        code_obj = compile(_check_and_rewrite(code, benchmark), HOOK_FILENAME, "exec")
    except HookCompileError:
        raise
    except (RecursionError, MemoryError) as e:  # deeply nested source: parser/rewrite/compiler
        _fail("hook_too_complex", f"hook code is nested too deeply to compile ({type(e).__name__})")
    except Exception as e:
        _fail("hook_compile", f"hook failed to compile: {type(e).__name__}: {e}"[:300])
    namespace = {"__builtins__": dict(SAFE_BUILTINS), "math": guards.SAFE_MATH, "re": guards.SAFE_RE,
                 "SequenceMatcher": guards.SafeSequenceMatcher, **_GUARD_GLOBALS}
    try:
        exec(code_obj, namespace)  # top-level defs with scalar defaults: runs no hook code
    except Exception as e:
        _fail("hook_compile", f"hook failed to compile: {type(e).__name__}: {e}"[:300])
    fn = namespace.get("hook")
    if not callable(fn):
        _fail("hook_compile", "hook object is not callable")
    return fn
