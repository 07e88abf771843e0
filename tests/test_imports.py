"""The import graph of the packages has no cycle, counting what Python really executes: every import
statement (function-local ones too), and for ``import a.b.c`` the packages ``a`` and ``a.b`` whose
``__init__`` runs first, unless they are the importing module's own parents (those are already
initialising: a package may re-export its submodules).  Modules of the project may not import project modules inside functions:
such an import can only hide a cycle or defer a cost the module should not have."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("fedpne_jax", "objectives")


def _modules() -> dict[str, str]:
    """Module name -> file, for every module of the project's packages."""
    out = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
                    if parts[-1] == "__init__":
                        parts = parts[:-1]
                    out[".".join(parts)] = path
    return out


def _imports(path: str, module: str, modules: dict):
    """(imported project module, line, inside a function) for each import of the file."""
    tree = ast.parse(open(path).read(), path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append((alias.name, child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - child.level + 1] + ([base] if base else []))
                for alias in child.names:
                    target = f"{base}.{alias.name}"
                    found.append((target if target in modules else base, child.lineno, in_function))
            visit(child, inner)

    visit(tree, False)
    return [(name, line, local) for name, line, local in found if name.split(".")[0] in PACKAGES]


def _graph():
    modules = _modules()
    edges = {m: set() for m in modules}
    local = []
    for module, path in modules.items():
        own = module.split(".")
        parents = {".".join(own[:i]) for i in range(1, len(own))}
        for target, line, in_function in _imports(path, module, modules):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):         # a.b.c runs a/__init__ and a/b/__init__ first
                prefix = ".".join(parts[:i])
                if prefix in modules and prefix != module and (prefix not in parents or prefix == target):
                    edges[module].add(prefix)
            if in_function:
                local.append(f"{os.path.relpath(path, ROOT)}:{line} imports {target}")
    return edges, local


def _cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycle():
    edges, _ = _graph()
    assert len(edges) > 50
    assert _cycles(edges) == []


def test_no_function_local_project_imports():
    _, local = _graph()
    assert local == []


def test_the_checker_sees_a_cycle():
    """The cycle finder itself: a planted cycle through a package's __init__ is found."""
    edges = {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": {"p"}, "q": set()}
    assert _cycles(edges) == [["p", "p.a", "p.b"]]
    with pytest.raises(AssertionError):
        assert _cycles(edges) == []


def test_core_imports_no_algorithm():
    """The registry sits below the algorithms, which register themselves: no module of core/ imports
    (directly) a module of algorithms/."""
    edges, _ = _graph()
    upward = sorted(f"{m} -> {t}" for m, targets in edges.items() if m.startswith("fedpne_jax.core")
                    for t in targets if t.startswith("fedpne_jax.algorithms"))
    assert upward == []
