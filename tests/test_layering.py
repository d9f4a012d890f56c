"""The import graph of the product packages and tools/ has only the allowed directions.

An AST scan of every module (nothing is imported; a call `importlib.import_module("x")` or
`__import__("x")` with a literal name counts as an import): kernels <- pruners <-
benchmarks, and the service: records <- store <- ingest, records <- verdicts, the site (`ci.site`)
over the core, the edges (outputs, runner, CLI, demo) over everything, reaching the site only
through its one entry point; no module of the core imports the site, and the layers import each
other in one direction only (no cycle between them); tools/ import any product package, never
`tests`; no module imports a leading-underscore name from outside its package.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The packages scanned, where present (others are being reshaped at the same time; scripts/ is not a package).
PACKAGES = ("ragged_kernels", "pruners", "benchmarks", "ci", "tools")
PRODUCT = ("ragged_kernels", "pruners", "benchmarks", "ci")

# Layer -> the first-party module prefixes it may import besides itself. A module's layer is the
# longest key that is its name or a dotted prefix of it; an import is allowed when its target is
# inside the importer's own layer or equals / lies under one of the listed prefixes.
CORE = ("ci.records", "ci.exit_codes", "ci.text", "ci.format", "ci.forking", "ci.store", "ci.ingest", "ci.verdicts",
        "ci.project")
ALLOWED: dict[str, tuple[str, ...]] = {
    "ragged_kernels": (),
    "pruners": ("ragged_kernels",),
    "benchmarks": ("pruners", "ragged_kernels"),
    # service core: plain Python over the store
    "ci.records": (),
    "ci.exit_codes": (),
    "ci.text": (),  # text fit for a terminal: used by every layer that prints what files and stores hold
    "ci.format": (),  # how a value is written: the PR comment and the site share it
    "ci.forking": (),  # how many forked workers: ingest's parsers and the site's pools share it
    "ci.store": ("ci.records", "ci.text"),  # ci.text: its messages quote stored text, redacted before it is cut
    "ci.ingest": ("ci.records", "ci.text", "ci.forking", "ci.store"),
    "ci.verdicts": ("ci.records", "ci.exit_codes", "ci.text"),  # ci.text: what changed in a run's environment, shown
    # the project's asv.conf.json and the settings every deciding command takes from it
    "ci.project": ("ci.records", "ci.verdicts"),
    # the site (the dashboard's static HTML) over the core: the store's read side, the records, the
    # formatter, stored text made printable and the verdict functions; the edges below call it, the
    # core never does
    "ci.site": ("ci.records", "ci.text", "ci.format", "ci.forking", "ci.store.reads", "ci.verdicts"),
    # service edges
    "ci.outputs": ("ci.records", "ci.exit_codes", "ci.text", "ci.format", "ci.verdicts"),
    "ci.runner": (*CORE, "ci.outputs"),
    "ci.cli": (*CORE, "ci.outputs", "ci.runner", "ci.demo"),
    "ci.demo": (*CORE, "ci.outputs", "ci.runner"),
    "ci": ("ci.cli",),  # ci/__init__.py and `python -m ci`
    "tools": PRODUCT,
}
# The site's one entry point, and the layers that may call it (tools reach it like any product API).
SITE, SITE_ENTRY = "ci.site", frozenset({"render_site"})
CALL_SITE = ("ci.outputs", "ci.runner", "ci.cli", "ci.demo")
# Never imported by the service: it runs on machines without a GPU stack.
SERVICE = ("ci",)  # the site included (ci.site)
GPU_STACK = frozenset({"torch", "torchvision", "triton", "timm", "ragged_kernels", "pruners", "benchmarks"})
# The service and tools keep STYLE.md's rule inside their packages too: no module imports another
# module's leading-underscore name (make it public on purpose, or move the caller).
NO_PRIVATE_AT_ALL = ("ci", "tools")

# Known violations of the private-name rule, each to be removed by the change that fixes it
# (importer, owner module, name). Listed, not silenced: the test fails once one is fixed. None left.
KNOWN_PRIVATE: set[tuple[str, str, str]] = set()


@dataclass(frozen=True)
class Module:
    """One module's source and whether it is a package's `__init__`."""

    source: str
    is_package: bool = False


def scan_tree(root: Path = ROOT) -> dict[str, Module]:
    """Every module of the scanned packages under `root`, by dotted name."""
    out: dict[str, Module] = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            out[name] = Module(path.read_text(encoding="utf-8"), is_package)
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _layer(name: str) -> str | None:
    keys = [k for k in ALLOWED if _under(name, k)]
    return max(keys, key=len) if keys else None


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


class _Imports:
    """The imports of one module: (target module, imported names, line) plus names bound to modules."""

    def __init__(self, name: str, mod: Module, known: dict[str, Module]) -> None:
        self.name, self.known = name, known
        self.package = name if mod.is_package else name.rpartition(".")[0]
        self.edges: list[tuple[str, tuple[str, ...], int]] = []
        self.bound: dict[str, str] = {}  # local name -> first-party module it names
        self.tree = ast.parse(mod.source)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.edges.append((a.name, (), node.lineno))
                    if a.asname:
                        self.bound[a.asname] = a.name
                    else:
                        self.bound[a.name.split(".")[0]] = a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom):
                base = self._absolute(node)
                names = []
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    if sub in known:  # `from pkg import module`
                        self.edges.append((sub, (), node.lineno))
                        self.bound[a.asname or a.name] = sub
                    else:
                        names.append(a.name)
                if names:
                    self.edges.append((base, tuple(names), node.lineno))
            elif isinstance(node, ast.Call) and (dynamic := _dynamic_import(node)) is not None:
                self.edges.append((dynamic, (), node.lineno))

    def _absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = self.package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1])
        return f"{base}.{node.module}" if node.module else base

    def attribute_uses(self) -> list[tuple[str, str, int]]:
        """(module, attribute, line) for every `module.attr` on a name bound to a first-party module."""
        out = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Attribute):
                chain: list[str] = []
                inner: ast.expr = node
                while isinstance(inner, ast.Attribute):
                    chain.append(inner.attr)
                    inner = inner.value
                if not isinstance(inner, ast.Name) or inner.id not in self.bound:
                    continue
                module = self.bound[inner.id]
                for attr in reversed(chain):
                    if f"{module}.{attr}" in self.known:
                        module = f"{module}.{attr}"
                        continue
                    out.append((module, attr, node.lineno))
                    break
        return out


# Calls that import a module named by a string: `importlib.import_module("x")`, `__import__("x")`.
DYNAMIC_IMPORTS = frozenset({"import_module", "__import__"})


def _dynamic_import(call: ast.Call) -> str | None:
    """The module a call imports by a literal name, else None."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in DYNAMIC_IMPORTS or not call.args:
        return None
    first = call.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _owner(module: str, known: dict[str, Module]) -> str:
    """The package a module's names belong to: the package itself for an `__init__`, else its parent."""
    mod = known.get(module)
    return module if mod is not None and mod.is_package else module.rpartition(".")[0]


def check(modules: dict[str, Module]) -> list[str]:
    """Every violation of the layering rules among `modules`, one line each."""
    bad: list[str] = []
    first_party = set(PACKAGES) | {"tests"}
    private_seen: set[tuple[str, str, str]] = set()
    for name, mod in sorted(modules.items()):
        layer = _layer(name)
        imports = _Imports(name, mod, modules)
        where = f"{name}:"
        for target, names, line in imports.edges:
            top = target.split(".")[0]
            if top == "tests":
                bad.append(f"{where}{line} imports {target}: product modules and tools never import tests")
                continue
            if any(_under(name, s) for s in SERVICE):
                if top in GPU_STACK:
                    bad.append(f"{where}{line} imports {target}: the service never imports the GPU stack")
                    continue
            if top in first_party and layer is not None:
                if _layer(target) == layer or any(_under(target, p) for p in ALLOWED[layer]):
                    pass
                elif _under(target, SITE) and layer in CALL_SITE:
                    if target != SITE or not names or not set(names) <= SITE_ENTRY:
                        bad.append(f"{where}{line} imports {target} {list(names)}: the site is called only "
                                   f"through `from {SITE} import {', '.join(sorted(SITE_ENTRY))}`")
                else:
                    bad.append(f"{where}{line} imports {target}: layer {layer} may import only "
                               f"{', '.join(ALLOWED[layer]) or 'itself'}")
            # private names: in a module path, among the imported names, and as attributes of modules
            parts = target.split(".")
            for i, part in enumerate(parts[1:], start=1):
                if _private(part):
                    bad += _private_use(name, ".".join(parts[:i]), ".".join(parts[: i + 1]), part, line, private_seen)
            for n in names:
                if _private(n):
                    bad += _private_use(name, _owner(target, modules), target, n, line, private_seen)
        for module, attr, line in imports.attribute_uses():
            if _private(attr):
                bad += _private_use(name, _owner(module, modules), module, attr, line, private_seen)
    for importer, module, attr in sorted(KNOWN_PRIVATE - private_seen):
        if importer in modules:
            bad.append(f"{importer} no longer reads {module}.{attr}: remove it from KNOWN_PRIVATE")
    return bad


def _private_use(
    importer: str, owner: str, module: str, name: str, line: int, seen: set[tuple[str, str, str]]
) -> list[str]:
    """A violation when `importer` reads `module.name` (a private name of package `owner`) from outside."""
    if owner.split(".")[0] not in PACKAGES:
        return []  # a third-party or standard-library private name is not ours to police
    inside = _under(importer, owner)
    strict = any(_under(importer, p) for p in NO_PRIVATE_AT_ALL)
    if importer == module or (inside and not strict):
        return []
    if (importer, module, name) in KNOWN_PRIVATE:
        seen.add((importer, module, name))
        return []
    why = "from outside its package" if not inside else "from another module (the service keeps names public)"
    return [f"{importer}:{line} reads {module}.{name}, a private name, {why}"]


def import_graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    """Module -> the scanned modules it imports (the module itself, or its nearest scanned package),
    lazy and dynamic imports included."""
    graph: dict[str, set[str]] = {}
    for name, mod in modules.items():
        outs = set()
        for target, _names, _line in _Imports(name, mod, modules).edges:
            parts = target.split(".")
            prefixes = (".".join(parts[:i]) for i in range(len(parts), 0, -1))
            found = next((p for p in prefixes if p in modules), None)  # the module itself, or its package
            if found is not None and found != name:
                outs.add(found)
        graph[name] = outs
    return graph


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Groups of modules that import each other (directly or round a loop), lazy imports included."""
    return strongly_connected(import_graph(modules))


def layer_cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Groups of layers (ALLOWED's keys: the product packages and the service's packages, the site
    among them) whose modules import each other round a loop, though no two modules may."""
    graph: dict[str, set[str]] = {}
    for name, outs in import_graph(modules).items():
        layer = _layer(name) or name
        graph.setdefault(layer, set()).update(t for o in outs if (t := _layer(o) or o) != layer)
    for outs in list(graph.values()):
        for t in outs:
            graph.setdefault(t, set())
    return strongly_connected(graph)


def core_imports_site(modules: dict[str, Module]) -> list[str]:
    """Every import of the site by a module of the service's core, one line each."""
    return [f"{name}:{line} imports {target}: the core never imports the site"
            for name, mod in sorted(modules.items()) if any(_under(name, c) for c in CORE)
            for target, _names, line in _Imports(name, mod, modules).edges if _under(target, SITE)]


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of `graph`; every component of more than one node is a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                out.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_tree_keeps_the_allowed_directions() -> None:
    modules = scan_tree()
    assert {"ci.records", "ci.store", "ci.site", "ci.site.render", "tools"} <= set(modules)  # the scan found the tree
    assert check(modules) == []


def test_no_two_modules_import_each_other() -> None:
    assert cycles(scan_tree()) == []


def test_no_two_layers_import_each_other() -> None:
    """The packages, not only the modules: the site and the edges that call it were once two
    top-level packages importing each other (`ci` -> `dashboard` -> `ci`)."""
    assert layer_cycles(scan_tree()) == []


def test_the_core_never_imports_the_site() -> None:
    modules = scan_tree()
    assert [n for n in modules if any(_under(n, c) for c in CORE)], "the scan found the core"
    assert core_imports_site(modules) == []


def test_a_layer_cycle_is_reported() -> None:
    # a lazy `importlib.import_module("ci.site")` is an import: a loop through it is a module cycle
    tree = {"ci": Module("", True), "ci.cli": Module('def f():\n    return importlib.import_module("ci.site")'),
            "ci.site": Module("from ci.site.render import render_site", True),
            "ci.site.render": Module("from ci.cli import main")}
    assert cycles(tree) == [["ci.cli", "ci.site", "ci.site.render"]]
    # no two modules import each other round a loop, but the two layers still do
    tree["ci.site.render"] = Module("")
    tree["ci.site.other"] = Module("from ci.cli import main")
    assert cycles(tree) == []
    assert layer_cycles(tree) == [["ci.cli", "ci.site"]]


def test_a_core_module_importing_the_site_is_reported() -> None:
    tree = {"ci": Module("", True), "ci.site": Module("", True), "ci.verdicts": Module("", True),
            "ci.verdicts.gates": Module("def f():\n    from ci.site import render_site")}
    assert core_imports_site(tree) == ["ci.verdicts.gates:2 imports ci.site: the core never imports the site"]


def test_the_layer_table_has_no_cycle() -> None:
    def reaches(layer: str, seen: tuple[str, ...]) -> None:
        for prefix in (*ALLOWED[layer], *((SITE,) if layer in CALL_SITE else ())):
            below = _layer(prefix)
            assert below not in seen, f"layers {' -> '.join((*seen, below))} form a cycle"
            if below != layer:
                reaches(below, (*seen, below))

    for layer in ALLOWED:
        reaches(layer, (layer,))


def test_a_cycle_is_reported() -> None:
    tree = {"ci": Module("", True), "ci.a": Module("from ci.b import x"), "ci.b": Module("def f():\n    import ci.a")}
    assert cycles(tree) == [["ci.a", "ci.b"]]


def test_every_scanned_module_has_a_layer() -> None:
    assert [n for n in scan_tree() if _layer(n) is None] == []


@pytest.mark.parametrize(
    ("modules", "expected"),
    [
        ({"ci.store.reads": "from ci.site import render_site"}, "layer ci.store may import only ci.records, ci.text"),
        ({"ci.verdicts.ab": "from ci.site.model import recovery"}, "layer ci.verdicts may import only"),
        ({"ci.site.model": "from ci.runner.jobs import run_pr"}, "layer ci.site may import only"),
        ({"ci.site.model": "import ci.cli"}, "layer ci.site may import only"),
        ({"ci.verdicts.ab": "import ci.store"}, "layer ci.verdicts may import only"),
        ({"ci.runner.publish": "from ci.site.render import render_site"}, "the site is called only through"),
        ({"ci.cli": "from ci.site import model"}, "the site is called only through"),
        ({"ci.cli": 'def f():\n    return __import__("ci.site.render")'}, "the site is called only through"),
        ({"ci.demo": 'import importlib\nimportlib.import_module("ci.site.model")'}, "the site is called only through"),
        ({"ragged_kernels.pack": "import pruners"}, "layer ragged_kernels may import only itself"),
        ({"pruners.base": "from benchmarks import presets"}, "layer pruners may import only ragged_kernels"),
        ({"ci.records": "import torch"}, "the service never imports the GPU stack"),
        ({"ci.site.svg": "from ragged_kernels import pack_tokens"}, "the service never imports the GPU stack"),
        ({"tools.bench_x": "from tests.dashboard.fakes import hostile_store"}, "never import tests"),
        ({"benchmarks.bench_x": "import tests.conftest"}, "never import tests"),
        ({"pruners.model": "from ragged_kernels.attention.interface import _check"}, "from outside its package"),
        ({"tools.bench_x": "import ci.store.writes\nci.store.writes._CHUNK"}, "from outside its package"),
        ({"ci.demo": "from ci.runner.git import _helper"}, "from outside its package"),
        ({"ci.runner.jobs": "from ci.runner.git import _helper"}, "from another module"),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else None,
)
def test_a_violation_is_reported(modules: dict[str, str], expected: str) -> None:
    tree = {"ci.store.writes": Module(""), **{name: Module(src) for name, src in modules.items()}}
    for name in list(tree):  # the packages the synthetic modules sit in, so that names resolve as in the tree
        parts = name.split(".")
        for i in range(1, len(parts)):
            tree.setdefault(".".join(parts[:i]), Module("", is_package=True))
    found = check(tree)
    assert any(expected in line for line in found), found


def test_allowed_imports_pass() -> None:
    tree = {
        "ci": Module("", True), "ci.store": Module("from ci.store.reads import StoreReads", True),
        "ci.store.reads": Module("from ci.records import Result\nfrom ci.store import codec"),
        "ci.store.codec": Module("import json"), "ci.records": Module("import math"),
        "ci.runner": Module("", True), "ci.runner.publish": Module("from ci.site import render_site"),
        "ci.cli": Module('def f():\n    from ci.site import render_site\n    return render_site'),
        "ci.site": Module("from ci.site.render import render_site", True),
        "ci.site.render": Module("from ci.records import Kind\nfrom ci.store.reads import StoreReads"),
        "benchmarks": Module("", True), "benchmarks._timing": Module("import time"),
        "benchmarks.bench_x": Module("from . import _timing\nfrom ._timing import _clock"),
    }
    assert check(tree) == []
