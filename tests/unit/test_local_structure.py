"""The local AWS extends moto one way and changes nothing process-wide for longer than a ``with`` block.

One mechanism replaces moto's methods (``smx_debug.local.patching.patch_once``): a behaviour that set an attribute
of moto's by hand, with its own ``_installed`` flag, would be a second. ``os.environ`` is changed only inside a
context manager that restores it (``server.scoped_environ``, a Lambda invocation's environment).
"""

from __future__ import annotations

import ast
from pathlib import Path

LOCAL = Path(__file__).resolve().parents[2] / "src" / "smx_debug" / "local"
_MUTATORS = {"update", "setdefault", "pop", "clear", "__setitem__", "__delitem__"}


def _modules() -> list[Path]:
    return sorted(LOCAL.rglob("*.py"))


def _is_os_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os")


def _environ_writes(function: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            lines += [node.lineno for t in targets if isinstance(t, ast.Subscript) and _is_os_environ(t.value)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS
              and _is_os_environ(node.func.value)):
            lines.append(node.lineno)
    return lines


def _is_context_manager(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any((isinstance(d, ast.Attribute) and d.attr == "contextmanager")
               or (isinstance(d, ast.Name) and d.id == "contextmanager") for d in function.decorator_list)


def test_local_structure_moto_is_patched_only_through_patch_once() -> None:
    found = {}
    for path in _modules():
        if path.name == "patching.py":
            continue
        tree = ast.parse(path.read_text())
        lines = [n.lineno for n in ast.walk(tree)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr"]
        if lines:
            found[str(path.relative_to(LOCAL))] = lines
    assert found == {}, "set moto's attributes with smx_debug.local.patching.patch_once"


def test_local_structure_os_environ_is_changed_only_within_a_restoring_context_manager() -> None:
    found = {}
    for path in _modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _is_context_manager(node):
                inner = {id(n) for child in node.body for n in ast.walk(child)
                         if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and _is_context_manager(n)}
                lines = [] if inner else _environ_writes(node)
                if lines:
                    found.setdefault(str(path.relative_to(LOCAL)), []).extend(lines)
        module_level = [n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef
                                                                   | ast.ClassDef)]
        for stmt in module_level:
            if lines := _environ_writes(stmt):
                found.setdefault(str(path.relative_to(LOCAL)), []).extend(lines)
    assert found == {}, "change os.environ only in a context manager that restores it (server.scoped_environ)"
