"""The structure figures of issue 32, read from the source with ``ast`` (nothing of the project is imported or run).

Run ``python bench/structure_figures.py`` (``--list`` also names the cycles, the walk's modules and the files with
the most function-local imports). It prints:

- exported names: the sum of every ``__all__``'s length under src/smx_debug (and with infra/ and lambdas/, the
  scope of issue 32's figure), the modules that declare one, and the packages that export most;
- function-local imports: ``import`` statements inside a function or method body (nested ones included), and the
  files that hold them (src/smx_debug; and with infra/ and lambdas/);
- import cycles between smx_debug modules: strongly connected components of the module graph, counted three
  ways: every import (module level, inside functions, under ``if TYPE_CHECKING:``), without the
  ``TYPE_CHECKING`` ones, and module-level imports only. ``from a.b import c`` is an arrow to ``a.b`` (and to
  ``a.b.c`` when that is a module), as tests/unit/test_layering.py reads it;
- the evaluator's walk, from the Lambda event (lambdas/evaluator/handler.py ``handler``) to StopTrainingJob:
  (a) the modules with a function on a static call path from the handler to a function that calls
  ``stop_training_job`` (a call is resolved through the module's imports, ``self``/``cls``, a class's
  ``__init__``/``__post_init__``, and otherwise by name where exactly one function of the tree bears that name,
  which follows injected callables such as the evaluator's responder; a nested function is a function of its own,
  called where it is called, not where it is defined; a function that defines one calling ``stop_training_job``,
  to hand it on, counts as calling it); (b) the smx_debug modules the handler's import loads (module-level imports, transitively, packages'
  ``__init__`` included), and (c) the same with function-local imports followed too.

Duplicate pairs are not measured here: the figure in issue 32 comes from a duplicate-lines tool over the whole tree.
The static walk is an estimate (dispatch through dictionaries and registries is not followed); what it names is
printed with ``--list`` so a reader can check it against the code.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANDLER_MODULE = "lambdas.evaluator.handler"
TARGET_CALL = "stop_training_job"
# Method names of the built-in types: ``", ".join(...)`` is never a call to a function of ours named join.
BUILTIN_METHODS = frozenset(n for t in (str, bytes, list, dict, set, frozenset, tuple, int, float) for n in dir(t))


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    is_package: bool
    # arrows by kind: "top" (module level), "local" (inside a function), "typing" (under TYPE_CHECKING)
    arrows: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    local_lines: list[int] = field(default_factory=list)  # the line of each function-local import
    exported: int | None = None

    @property
    def local_imports(self) -> int:
        return len(self.local_lines)
    bound: dict[str, str] = field(default_factory=dict)  # name in this module -> "module" or "module:attr"


def _modules(root: Path) -> dict[str, Module]:
    mods: dict[str, Module] = {}
    src = root / "src"
    paths = [(p, ".".join(p.relative_to(src).with_suffix("").parts)) for p in sorted((src / "smx_debug").rglob("*.py"))]
    for folder in ("infra", "lambdas"):  # counted with src for exported names and function-local imports
        paths += [(p, ".".join(p.relative_to(root).with_suffix("").parts)) for p in sorted((root / folder).rglob("*.py"))]
    for path, name in paths:
        is_package = path.name == "__init__.py"
        name = name.removesuffix(".__init__")
        mods[name] = Module(name, path, ast.parse(path.read_text(encoding="utf-8")), is_package)
    return mods


def read_modules(root: Path) -> dict[str, Module]:
    """The modules of ``root``'s src/smx_debug, infra/ and lambdas/, each with its imports read (its arrows by kind,
    function-local import lines, exported names and bound names)."""
    mods = _modules(root)
    _read_imports(mods)
    return mods


def _resolve(mods: dict[str, Module], current: Module, node: ast.Import | ast.ImportFrom) -> list[tuple[str, str]]:
    """(bound name, what it is: "module" or "module:attr") for each name the import binds, smx_debug's only."""
    out: list[tuple[str, str]] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in mods:  # `import a.b` binds a; `import a.b as c` binds c to a.b
                out.append((alias.asname, alias.name) if alias.asname else (alias.name.split(".")[0],
                                                                             alias.name.split(".")[0]))
        return out
    base = node.module or ""
    if node.level:
        parts = current.name.split(".")
        parts = parts if current.is_package else parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([base] if base else [])])
    if base not in mods:
        return out
    for alias in node.names:
        full = f"{base}.{alias.name}"
        out.append((alias.asname or alias.name, full if full in mods else f"{base}:{alias.name}"))
    return out


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _read_imports(mods: dict[str, Module]) -> None:
    for mod in mods.values():

        def visit(node: ast.AST, kind: str, mod: Module = mod) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child):
                    for inner in child.body:
                        visit_one(inner, "typing")
                    for inner in child.orelse:
                        visit_one(inner, kind)
                    continue
                visit_one(child, kind)

        def visit_one(child: ast.AST, kind: str, mod: Module = mod) -> None:
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, "local" if kind != "typing" else kind)
                return
            if isinstance(child, ast.Import | ast.ImportFrom):
                if kind == "local":
                    mod.local_lines.append(child.lineno)
                for bound, what in _resolve(mods, mod, child):
                    target = what.split(":")[0]
                    if target != mod.name:
                        mod.arrows[kind].add(target)
                    if kind == "top":
                        mod.bound[bound] = what
                if kind == "local":  # a function's own import names what its calls mean, for the walk
                    for bound, what in _resolve(mods, mod, child):
                        mod.bound.setdefault(bound, what)
                return
            if isinstance(child, ast.Assign | ast.AnnAssign) and kind == "top":  # `__all__: list[str] = []` too
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for name in targets:
                    if isinstance(name, ast.Name) and name.id == "__all__" and isinstance(
                            child.value, ast.List | ast.Tuple):
                        mod.exported = len(child.value.elts)
            visit(child, kind)

        visit(mod.tree, "top")


def _sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def _graph(mods: dict[str, Module], kinds: Iterable[str]) -> dict[str, set[str]]:
    kinds = tuple(kinds)
    return {m.name: {t for k in kinds for t in m.arrows.get(k, ())} for m in mods.values()}


def _closure(mods: dict[str, Module], start: str, kinds: tuple[str, ...]) -> set[str]:
    """Modules loaded by importing ``start`` (importing a.b.c loads a and a.b)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        current = mods[todo.pop()]
        for target in sorted(t for k in kinds for t in current.arrows.get(k, ())):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                parent = ".".join(parts[:i])
                if parent in mods and parent not in seen:
                    seen.add(parent)
                    todo.append(parent)
    return seen


# ------------------------------------------------------------------------------------------- the static walk
def _functions(mods: dict[str, Module]) -> tuple[dict[str, ast.AST], dict[str, list[str]]]:
    """Every top-level function, class and method as "module:Name" / "module:Class.method"; and, for resolution
    by name, every function (nested ones under their enclosing function's key) by its bare name."""
    defs: dict[str, ast.AST] = {}
    by_name: dict[str, list[str]] = defaultdict(list)
    def nested(key: str, node: ast.AST) -> None:
        """A function defined inside ``node`` is a definition of its own ("outer.<locals>.inner"): defining it
        (a closure handed on, such as the evaluator's responder) is not calling it."""
        for inner in _own_nodes(node):
            if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                inner_key = f"{key}.<locals>.{inner.name}"
                defs[inner_key] = inner
                by_name[inner.name].append(inner_key)
                nested(inner_key, inner)

    for mod in mods.values():
        for node in mod.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                key = f"{mod.name}:{node.name}"
                defs[key] = node
                by_name[node.name].append(key)
                nested(key, node)
            elif isinstance(node, ast.ClassDef):
                defs[f"{mod.name}:{node.name}"] = node
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        key = f"{mod.name}:{node.name}.{item.name}"
                        defs[key] = item
                        by_name[item.name].append(key)
                        nested(key, item)
    return defs, by_name


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's body, nested functions' bodies excluded (their definitions included)."""
    for child in ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _own_nodes(child)


def _lookup(mods: dict[str, Module], defs: dict[str, ast.AST], module: str, name: str) -> str | None:
    """What ``name`` means in ``module``: a definition of its own or one it imports (through re-exports)."""
    for _ in range(6):
        if f"{module}:{name}" in defs:
            return f"{module}:{name}"
        what = mods[module].bound.get(name) if module in mods else None
        if what is None or ":" not in what:
            return None
        module, name = what.split(":", 1)
    return None


def _calls(mods: dict[str, Module], defs: dict[str, ast.AST], by_name: dict[str, list[str]], key: str) -> set[str]:
    module, qual = key.split(":", 1)
    owner = qual.split(".")[0] if "." in qual else None
    node = defs[key]
    out: set[str] = set()
    if isinstance(node, ast.ClassDef):
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in {"__init__", "__post_init__"}:
                out.add(f"{module}:{node.name}.{item.name}")
        return out
    for call in _own_nodes(node):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        found: str | None = None
        attr: str | None = None
        if isinstance(func, ast.Name):
            found = _lookup(mods, defs, module, func.id)
            attr = None if found else func.id
        elif isinstance(func, ast.Attribute):
            attr = func.attr
            value = func.value
            if isinstance(value, ast.Name) and value.id in {"self", "cls"} and owner:
                found = f"{module}:{owner}.{attr}" if f"{module}:{owner}.{attr}" in defs else None
            elif isinstance(value, ast.Name):
                holder = _lookup(mods, defs, module, value.id)
                bound = mods[module].bound.get(value.id)
                if holder and f"{holder}.{attr}" in defs:
                    found = f"{holder}.{attr}"
                elif bound and ":" not in bound:  # a module imported whole
                    found = _lookup(mods, defs, bound, attr)
            if found:
                attr = None
        if found:
            out.add(found)
        elif attr and attr not in BUILTIN_METHODS and attr != TARGET_CALL and len(set(by_name.get(attr, ()))) == 1:
            out.add(by_name[attr][0])
    return out


def _reachable(starts: Iterable[str], edges: Mapping[str, Iterable[str]]) -> set[str]:
    """The nodes reached from ``starts`` (included) along ``edges``."""
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        key = todo.pop()
        if key not in seen:
            seen.add(key)
            todo.extend(edges.get(key, ()))
    return seen


def _walk(mods: dict[str, Module]) -> tuple[list[str], list[str]]:
    defs, by_name = _functions(mods)
    graph = {key: _calls(mods, defs, by_name, key) for key in defs}
    targets = {key for key, node in defs.items() if not isinstance(node, ast.ClassDef) and any(
        isinstance(n, ast.Attribute) and n.attr == TARGET_CALL for n in ast.walk(node))}
    reverse: dict[str, set[str]] = defaultdict(set)
    for key, callees in graph.items():
        for callee in callees:
            reverse[callee].add(key)
    path = _reachable([f"{HANDLER_MODULE}:handler"], graph) & _reachable(targets, reverse)
    steps = {callee for key in path for callee in graph.get(key, ())} - path
    return sorted(path), sorted(steps)


def walk_modules(mods: dict[str, Module]) -> tuple[list[str], list[str]]:
    """The evaluator's walk as modules: those on the static call path from the Lambda event to StopTrainingJob
    (the handler's own Lambda module left out), and those with the functions that path calls too."""
    path, steps = _walk(mods)
    path_modules = {k.split(":")[0] for k in path if not k.startswith(HANDLER_MODULE)}
    return sorted(path_modules), sorted({k.split(":")[0] for k in steps} | path_modules)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if parts[0] == "smx_debug" and len(parts) > 2 else module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="also name the cycles, the walk and the top files")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="the tree to read (default: this checkout's working tree; for a commit alone: "
                             "git archive <commit> src infra lambdas | tar -x -C DIR)")
    args = parser.parse_args(argv)
    root = args.root.resolve()

    mods = read_modules(root)
    src = {name: m for name, m in mods.items() if name.startswith("smx_debug")}

    declaring = [m for m in src.values() if m.exported is not None]
    by_package: Counter[str] = Counter()
    for m in declaring:
        by_package[m.name if m.name == "smx_debug" else m.name.split(".")[1]] += m.exported or 0
    tree_declaring = [m for m in mods.values() if m.exported is not None]
    print(f"modules: {len(src)} under src/smx_debug, {len(mods)} with infra/ and lambdas/")
    print(f"exported names: {sum(m.exported or 0 for m in declaring)} in {len(declaring)} of src's modules declaring "
          f"__all__; {sum(m.exported or 0 for m in tree_declaring)} in {len(tree_declaring)} with infra/ and "
          f"lambdas/; most: {', '.join(f'{p} {n}' for p, n in by_package.most_common(6))}")
    faces = sorted(((m.exported or 0, m.name) for m in declaring if m.is_package), reverse=True)
    print(f"  package faces (__init__'s __all__): {', '.join(f'{n} {e}' for e, n in faces[:7])}")

    with_local = [m for m in src.values() if m.local_imports]
    tree_local = [m for m in mods.values() if m.local_imports]
    print(f"function-local imports: {sum(m.local_imports for m in src.values())} in {len(with_local)} of src's files; "
          f"{sum(m.local_imports for m in tree_local)} in {len(tree_local)} with infra/ and lambdas/")

    every = _sccs(_graph(src, ("top", "local", "typing")))
    runtime = _sccs(_graph(src, ("top", "local")))
    module_level = _sccs(_graph(src, ("top",)))
    print(f"import cycles (strongly connected groups of modules): {len(every)} with TYPE_CHECKING and "
          f"function-local imports ({sum(map(len, every))} modules), {len(runtime)} without TYPE_CHECKING, "
          f"{len(module_level)} of module-level imports only")

    path, steps = _walk(mods)
    on_path = [k for k in path if not k.startswith(HANDLER_MODULE)]
    path_modules, step_modules = walk_modules(mods)
    loaded = sorted(_closure(mods, HANDLER_MODULE, ("top",)))
    loaded_all = sorted(_closure(mods, HANDLER_MODULE, ("top", "local")))
    print(f"evaluator walk (Lambda event -> StopTrainingJob): {len(path_modules)} modules in "
          f"{len({_package(m) for m in path_modules})} packages on the static call path "
          f"({len(on_path)} functions); with the functions that path calls (its steps: discover, read, evaluate, "
          f"verify, act) {len(step_modules)} modules in {len({_package(m) for m in step_modules})} packages; "
          f"the handler's import loads {len(loaded)} smx_debug modules, "
          f"{len(loaded_all)} with function-local imports followed")

    if args.list:
        print("\ncycles (every import):")
        for group in every:
            kinds = "module level" if any(set(group) <= set(g) for g in module_level) else (
                "through function-local imports" if any(set(group) <= set(g) for g in runtime) else "TYPE_CHECKING")
            print(f"  {' <-> '.join(group)}  [{kinds}]")
        print("\nwalk, functions on the path:")
        for key in on_path:
            print(f"  {key}")
        print("\nwalk, the path's steps (functions it calls):")
        for key in steps:
            print(f"  {key}")
        print("\nfiles with the most function-local imports:")
        for m in sorted(tree_local, key=lambda m: -m.local_imports)[:15]:
            print(f"  {m.local_imports:3d}  {m.path.relative_to(root)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
