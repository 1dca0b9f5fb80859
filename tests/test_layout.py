"""The package layout: data flows one way, no import cycles, a docstring for every module.

Every import counts, at module level or inside a function: a module imported lazily is still
a dependency (issue 61).  There is no rule on a module's length: a module is split where its
concerns part."""

import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "symbolic_cost"

# Each module may import only from its own layer or a layer above it (earlier in this list).
LAYERS = [
    {"symbols", "conventions", "named_conventions", "extrema", "bounds", "sampled", "trees", "rounding",
     "rationals", "cost", "collective_kinds", "checks", "digits", "files", "reader", "budget", "collector", "latex", "flat"},
    {"ops"}, {"blocks"}, {"parallel"}, {"models"}, {"analysis"}, {"timing"}, {"numeric"}, {"inference"},
    {"tools"}, {"reproduce"}, {"report"}, {"app"}, {"cli"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        yield ".".join(p for p in parts if p != "__init__"), path


def _imports(path):
    """(imported module, imported at module level?) for every import of the package."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("symbolic_cost"):
            names = [f"{node.module}.{a.name}" for a in node.names]
            yield from ((n, id(node) in top) for n in [node.module] + names)
        elif isinstance(node, ast.Import):
            yield from ((a.name, id(node) in top) for a in node.names if a.name.startswith("symbolic_cost"))


def _layer(module: str):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_every_module_is_in_a_layer():
    unknown = {_layer(m) for m, _ in _modules()} - set(RANK) - {None, "__main__"}
    assert not unknown, f"modules outside the layer map: {unknown}"


def test_no_module_imports_from_below():
    known = {m for m, _ in _modules()}
    upward = []
    for module, path in _modules():
        here = _layer(module)
        if here not in RANK:
            continue       # the package's own __init__ and __main__ gather everything
        for target, _ in _imports(path):
            if target not in known:
                continue   # a name imported from a module, checked through its module
            there = _layer(target)
            if there in RANK and RANK[there] > RANK[here]:
                upward.append(f"{module} imports {target}")
    assert not upward, "\n".join(upward)


def test_no_import_cycles():
    known = {m for m, _ in _modules()}
    graph = {m: {t for t, _ in _imports(p) if t in known and t != m} for m, p in _modules()}
    # a package's __init__ importing its own submodules is how packages work, not a cycle
    graph = {m: {t for t in deps if not t.startswith(m + ".")} for m, deps in graph.items()}
    state, cycles = {}, []

    def visit(node, trail):
        state[node] = "open"
        for nxt in graph[node]:
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(trail[trail.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for module in graph:
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(cycles)


@pytest.mark.parametrize("module,path", [(m, p) for m, p in _modules()])
def test_module_opens_with_a_docstring(module, path):
    assert ast.get_docstring(ast.parse(path.read_text())), f"{module} has no docstring saying what it owns"


MEASUREMENT = re.compile(r"\bCPU-s\b|AVX-512 EPYC|\d-core AMD|Measured on|\(profiled\)|"
                         r"\b20\d\d-\d\d-\d\d\b[^\n]*\b(CPU|ms|M/s)\b|\b(CPU|ms|M/s)\b[^\n]*\b20\d\d-\d\d-\d\d\b")
"""A timing with the machine or the day it was taken on: the history of a change, which belongs
in its commit, not in the code that the change left."""


def test_no_comment_records_a_timing():
    """Docstrings and comments say what and why, not how long it took where (issue 61); the
    figures live in ``reports/benchmark.md`` and the commits."""
    found = [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}" for _, path in _modules()
             for n, line in enumerate(path.read_text().splitlines(), 1) if MEASUREMENT.search(line)]
    assert not found, "\n".join(found)


def test_a_timing_is_recognised():
    """The rule above finds the shapes the package's history wrote."""
    assert MEASUREMENT.search("Measured on GPT-3 175B's calibrated totals (2,000,000 rows")
    assert MEASUREMENT.search("thread (AVX-512 EPYC, 2026-11-26): best_of 0.111")
    assert MEASUREMENT.search("took 10.2-10.3 CPU-s in a fresh process")
    assert MEASUREMENT.search("optimised code took 14 ms (2026-11-28)")
    assert MEASUREMENT.search("Measured on a 2-core AMD EPYC, 10^8 rows")
    assert not MEASUREMENT.search("torchtitan 114151a, 2026-03-23, removed the field")
    assert not MEASUREMENT.search("8 of DDR4-3200 per EPYC 7742, two per DGX A100")


def test_the_torch_reference_is_not_shipped():
    assert not (PACKAGE / "validation.py").exists()
    for module, path in _modules():
        assert not any(t.startswith("torch") for t, _ in _imports(path)), module


def _private_uses(module: str, path) -> list[str]:
    """Private names (``_x``, not dunders) ``module`` takes from another module of the package:
    ``from symbolic_cost.a import _x``, and ``a._x`` on a module it imported as ``a``."""
    def private(name):
        return name.startswith("_") and not name.startswith("__")
    tree, found, modules = ast.parse(path.read_text()), [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("symbolic_cost"):
            found += [a.name for a in node.names if private(a.name) and node.module != module]
            modules.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            modules.update({a.asname or a.name: a.name for a in node.names if a.name.startswith("symbolic_cost")})
    known = {m for m, _ in _modules()}
    found += [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and private(node.attr)
              and isinstance(node.value, ast.Name) and modules.get(node.value.id) in known]
    return found


def test_no_private_name_is_imported_from_another_module():
    """What a module shares is public, with a docstring (issue 26, item 5)."""
    used = [f"{module}: {name}" for module, path in _modules() for name in _private_uses(module, path)]
    assert not used, "\n".join(used)


def test_private_uses_are_found(tmp_path):
    path = tmp_path / "x.py"
    path.write_text("from symbolic_cost.ops.matmul import _kv, logits\nfrom symbolic_cost.ops import matmul\n"
                    "from symbolic_cost import __version__\nmatmul._scores(1)\nlogits._x\n")
    assert _private_uses("symbolic_cost.x", path) == ["_kv", "_scores"]


def test_imports_inside_functions_are_found(tmp_path):
    """A lazy import is a dependency: the cycle and layer tests read it as any other."""
    path = tmp_path / "x.py"
    path.write_text("import symbolic_cost.symbols\n\n\ndef f():\n    from symbolic_cost.cli import main\n")
    assert sorted(_imports(path)) == [("symbolic_cost.cli", False), ("symbolic_cost.cli.main", False),
                                      ("symbolic_cost.symbols", True)]


def _architecture_page():
    """``docs/architecture.md``'s module lines: ``(section heading, module path)`` in page order."""
    section, listed = None, []
    for line in (PACKAGE.parent / "docs" / "architecture.md").read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.startswith("- `") and "`: " in line:
            listed.append((section, line[3:line.index("`: ")]))
    return listed


def test_the_architecture_page_names_every_module_once_under_its_layer():
    """The map of modules a newcomer reads stays the package's (issue 61): no module missing,
    none gone, each under its own layer, the layers in the order data flows."""
    listed = _architecture_page()
    paths = [path for _, path in listed]
    actual = sorted(str(p.relative_to(PACKAGE)) for _, p in _modules())
    assert sorted(paths) == actual, (set(paths) ^ set(actual), len(paths) - len(set(paths)))
    wrong = [(s, p) for s, p in listed if ("/" in p) != s.startswith("`") or "/" in p and s != f"`{p.split('/')[0]}/`"]
    assert not wrong, wrong
    order = [RANK.get(p.split("/")[0] if "/" in p else p.removesuffix(".py"), 0) for p in paths]
    assert order == sorted(order), "the page's layers are not in the order of LAYERS"
