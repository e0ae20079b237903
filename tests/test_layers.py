"""The package's import graph is acyclic and layered.

The graph is read from the source with :mod:`ast`: every ``import`` of the package counts, at module
level, inside functions (the lazy imports) and under ``TYPE_CHECKING``. ``from pkg import name``
is an edge to ``pkg.name`` when that is a module of the package (``.py`` or compiled ``.pyx``),
else to ``pkg``; a package is its ``__init__``. An ``__init__`` that re-exports its submodules
imports them, so a submodule that imported the package back would close a cycle: it imports
the defining submodule instead.
"""

import ast
from pathlib import Path

import pytest

import skdpsco

ROOT = Path(skdpsco.__file__).parent
PACKAGE = ROOT.name


def _modules() -> dict:
    """``{dotted name: path}`` of the package's modules (``None`` for a compiled ``.pyx`` module)."""
    modules = {}
    for path in sorted(ROOT.rglob("*.py")) + sorted(ROOT.rglob("*.pyx")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path if path.suffix == ".py" else None
    return modules


def _imported(node, package: str, modules: dict) -> list:
    """The modules of the package one ``import`` statement ``node`` imports, seen from ``package``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    return [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names]


def import_graph() -> dict:
    """``{module: set of the package's modules it imports}``, every import statement counted."""
    modules = _modules()
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        if path is None:
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= {target for target in _imported(node, package, modules) if target in modules}
        graph[name].discard(name)
    return graph


def strongly_connected_components(graph: dict) -> list:
    """The components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    index, low, on_stack, stack, components = {}, {}, set(), [], []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def _path(graph: dict, start: str, targets) -> list | None:
    """A shortest import chain from ``start`` to a module ``targets`` accepts (``None``: none)."""
    previous, frontier = {start: None}, [start]
    while frontier:
        following = []
        for node in frontier:
            if targets(node) and node != start:
                chain = [node]
                while previous[chain[-1]] is not None:
                    chain.append(previous[chain[-1]])
                return chain[::-1]
            for successor in sorted(graph[node]):
                if successor not in previous:
                    previous[successor] = node
                    following.append(successor)
        frontier = following
    return None


def _within(*packages: str):
    names = [f"{PACKAGE}.{package}" for package in packages]
    return lambda module: any(module == name or module.startswith(name + ".") for name in names)


def test_the_graph_reads_lazy_and_type_checking_imports():
    graph = import_graph()
    # the registry imports every solver; the solvers name Problem under TYPE_CHECKING only
    assert f"{PACKAGE}.solvers.snowball" in graph[f"{PACKAGE}.solvers"]
    assert f"{PACKAGE}.solvers._problem" in graph[f"{PACKAGE}.solvers.phased"]
    # a lazy import inside a function (the Dask validation of fit)
    assert f"{PACKAGE}._dask" in graph[f"{PACKAGE}.linear_model._base"]
    # ``from . import module`` is an edge to the module, a compiled one included
    assert f"{PACKAGE}.rows._blocks" in graph[f"{PACKAGE}.rows._fused"]


def test_the_import_graph_has_no_cycle():
    graph = import_graph()
    cycles = strongly_connected_components(graph)
    described = [
        f"{len(component)} modules: " + "; ".join(
            f"{module} -> {sorted(graph[module] & set(component))}" for module in component)
        for component in cycles
    ]
    assert not cycles, "import cycles (strongly connected components):\n" + "\n".join(described)


def test_submodules_do_not_import_their_re_exporting_package():
    graph = import_graph()
    offending = sorted(
        (module, package)
        for module, imported in graph.items()
        for package in imported
        if module.startswith(package + ".") and any(m.startswith(package + ".") for m in graph[package])
    )
    assert not offending, f"import the defining submodule instead of the package: {offending}"


@pytest.mark.parametrize(
    "lower, upper",
    [
        (_within("rows", "accounting", "losses"), _within("solvers", "linear_model", "model_selection")),
        (_within("solvers"), _within("linear_model", "model_selection", "preprocessing")),
    ],
    ids=["rows-accounting-losses below the estimators", "solvers below the estimators"],
)
def test_lower_layers_never_reach_the_upper_ones(lower, upper):
    graph = import_graph()
    chains = [chain for module in sorted(graph) if lower(module) for chain in [_path(graph, module, upper)] if chain]
    assert not chains, "imports from a lower layer into an upper one:\n" + "\n".join(" -> ".join(c) for c in chains)
