"""The layering of ARCHITECTURE.md, the curated public names, and the exit codes, checked."""

from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path

import takeback
from takeback import errors

PKG = Path(takeback.__file__).resolve().parent

# Lower number = lower layer; a module may import only from its own layer or below.
LAYERS = {
    "errors": 0,
    "_types": 0,
    "_fs": 0,
    "_lazy": 0,
    "_where": 0,
    "_wire": 0,
    "_service_client": 0,
    "model": 1,
    "store": 2,
    "scan": 2,
    "ops": 3,
    "workspace": 4,
    "_session": 4,
    "_likeness": 4,
    "_stores": 4,
    "_announce": 4,
    "_host": 4,
    "_takebacks": 4,
    "_upkeep": 4,
    "_sentences": 4,
    "__init__": 4,
    "__main__": 7,
    "integrations": 5,
    "cli": 6,
}


@functools.cache
def _nodes(source: str) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(ast.parse(source)))


def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Return every node of a module's syntax tree (``ast.walk``), parsed and walked once
    for all the checks that read it."""
    return _nodes(path.read_text())


def layer_of(module: str) -> int:
    return LAYERS[module.split(".")[0]]


def imports_of(path: Path) -> list[str]:
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    found = []
    for node in nodes(path):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
                if not target and node.module is None:
                    target = ".".join(base)
                if not target:
                    # ``from .. import x``: a submodule, or a name of the package root.
                    for alias in node.names:
                        found.append(alias.name if alias.name in LAYERS else "__init__")
                    continue
                found.append(target)
            elif node.module and node.module.startswith("takeback"):
                found.append(node.module.removeprefix("takeback").lstrip(".") or "__init__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("takeback."):
                    found.append(alias.name.removeprefix("takeback."))
    return found


def test_each_layer_imports_only_from_below() -> None:
    bad = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).with_suffix("")
        me = ".".join(rel.parts)
        for target in imports_of(path):
            if not target:
                continue
            if layer_of(target) > layer_of(me):
                bad.append(f"{me} imports {target}")
    assert bad == []


def test_the_library_below_the_cli_never_touches_process_state() -> None:
    forbidden = ("sys.exit", "os.getcwd", "sys.argv", "print(")
    bad = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        if rel.parts[0] in ("cli", "integrations") or rel.name == "__main__.py":
            continue
        text = path.read_text()
        bad += [f"{rel}: {word}" for word in forbidden if word in text]
    assert bad == []


# What belongs to the process, not the library (STYLE.md 2 and 3): its environment, its
# current folder, argv, exit, and its standard streams. Only cli/ and integrations/ (and
# __main__) may touch them; the library takes root, store and options as arguments and
# returns data.
PROCESS_STATE = {
    "os": {
        "environ",
        "environb",
        "getenv",
        "getenvb",
        "putenv",
        "unsetenv",
        "getcwd",
        "getcwdb",
        "chdir",
    },
    "sys": {"argv", "exit", "stdin", "stdout", "stderr", "__stdin__", "__stdout__", "__stderr__"},
}
PROCESS_BUILTINS = {"print", "input"}


def process_state_used(path: Path) -> list[str]:
    """Return each use of the process's state in a module: ``os.environ``, ``print(``..."""
    # The names ``import os`` and ``import sys as s`` bind, wherever they are imported.
    modules = {
        alias.asname or alias.name: alias.name
        for node in nodes(path)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name in PROCESS_STATE
    }
    found = []
    for node in nodes(path):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr in PROCESS_STATE[modules[node.value.id]]
        ):
            found.append(f"{modules[node.value.id]}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module in PROCESS_STATE and not node.level:
            found += [
                f"from {node.module} import {alias.name} (line {node.lineno})"
                for alias in node.names
                if alias.name in PROCESS_STATE[node.module]
            ]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in PROCESS_BUILTINS
        ):
            found.append(f"{node.func.id}() (line {node.lineno})")
    return found


def test_process_state_finder_sees_each_way_in(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nimport sys as s\nfrom os import getenv\n"
        "os.environ.get('X')\ns.stdout.write('x')\nprint('x')\n"
        "os.path.join('a')\ns.getrecursionlimit()\n"
    )
    assert sorted(process_state_used(sample)) == [
        "from os import getenv (line 3)",
        "os.environ (line 4)",
        "print() (line 6)",
        "sys.stdout (line 5)",
    ]


def test_nothing_below_the_edges_reads_the_environment_or_writes_output() -> None:
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        if rel.parts[0] in ("cli", "integrations") or rel.name == "__main__.py":
            continue
        bad += [f"{rel}: {use}" for use in process_state_used(path)]
    assert bad == []


def module_name(path: Path) -> str:
    """Return a module's dotted name below ``takeback`` (``cli._app``, ``cli``)."""
    parts = list(path.relative_to(PKG).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    """Return whether a dotted name below ``takeback`` is a module or package of it."""
    where = PKG.joinpath(*name.split(".")) if name else PKG
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imported_names(path: Path) -> list[tuple[str, str]]:
    """Return (module below ``takeback``, name) for each name a module imports from takeback.

    ``""`` is the package root; a submodule imported by name (``from . import _app``)
    is given as the module itself, with the name ``*``.
    """
    me = module_name(path)
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    if me == "":
        package = []
    found = []
    for node in nodes(path):
        if isinstance(node, ast.Import):
            found += [
                (alias.name.removeprefix("takeback").lstrip("."), "*")
                for alias in node.names
                if alias.name == "takeback" or alias.name.startswith("takeback.")
            ]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and (node.module == "takeback" or node.module.startswith("takeback.")):
                module = node.module.removeprefix("takeback").lstrip(".")
            else:
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}" if module else alias.name
                found.append((sub, "*") if is_module(sub) else (module, alias.name))
    return found


# Where cli/ and integrations/ reach past the public API. The rule (ARCHITECTURE.md,
# "A new agent ... using the public API only") is that they import the root's ``__all__``
# and ``takeback.errors``, besides their own modules (and cli, integrations'), and the
# pure base modules of BASE_BY_RULE. Each entry here is (importer, module, name), with why;
# the list may only shrink: a new reach fails the test, and so does an entry no longer used.
#: The base modules an edge may import by rule: they load nothing of the library (the
#: relay and a hook call find the service and talk to it with them alone) and hold no
#: policy of the library's.
BASE_BY_RULE = {"_where", "_wire", "_service_client"}
EDGE_EXCEPTIONS = {
    # The one quoting of a path, shared by the diff (ops) and the CLI's lists.
    ("cli._render", "ops", "quote_path"),
    # The short form of an id.
    ("cli._render", "_types", "short"),
    # Whether the workspace was ever scanned (read through ws.open_store().meta),
    # which lengthens the hook's time bound.
    ("integrations.claude_code._hook", "scan", "CACHE_KEY"),
    # The service's daemon answers the scan's question with the scan layer's own
    # watcher, as ``watch`` watches with it. It is the service's plumbing, not the
    # library's API, so it is not in ``__all__``.
    ("integrations._service", "scan._watcher", "Watcher"),
    ("integrations._watch", "scan._watcher", "Watcher"),
    # The service keeps its store's databases open between the calls it runs, so that
    # each call's close does not checkpoint and remove the write-ahead log, and copies
    # the log into them in its idle time instead of in a call's commit.
    ("integrations._service", "store", "hold_databases"),
    ("integrations._service", "store", "HeldDatabases"),
    # In its idle time the service reads ahead the last trees of the folders that hold
    # others, from the folder cache its last call left in this process.
    ("integrations._read_ahead", "scan", "cached_folders"),
    ("integrations._read_ahead", "scan", "inner_trees"),
    # The one atomic writer (temp file, fsync, rename), for the settings file.
    ("integrations.claude_code._settings", "_fs", "atomic_write"),
}


def test_the_edges_use_only_the_public_api() -> None:
    public = set(takeback.__all__)
    reach = set()
    for path in sorted(PKG.rglob("*.py")):
        me = module_name(path)
        edge = me.split(".")[0]
        if edge not in ("cli", "integrations"):
            continue
        own = ("cli", "integrations") if edge == "cli" else ("integrations",)
        for module, name in imported_names(path):
            if module.split(".")[0] in own or module == "errors" or module in BASE_BY_RULE:
                continue
            if module == "" and name in public:
                continue
            reach.add((me, module, name))
    assert sorted(reach - EDGE_EXCEPTIONS) == [], "new reach past the public API"
    assert sorted(EDGE_EXCEPTIONS - reach) == [], "no longer used: take it off the list"


#: The store's users that see it only as its seam: ``ops`` and the API import the names
#: of ``takeback.store.__all__`` (``Store``, ``Meta``, the row types, ``open_store``...),
#: never a store module (``store._meta.MetaStore``); ``scan``, beside the store, never
#: reaches into it either.
SEAM_USERS = ("ops", "scan", "workspace", "_session", "_likeness", "__init__")


def past_the_seam(me: str, imports: list[tuple[str, str]], public: set[str]) -> list[str]:
    """Return each import of ``me`` (module, name) that reaches past the store's names."""
    bad = []
    for module, name in imports:
        if module.split(".")[0] != "store":
            continue
        if module == "store" and (name == "*" or name in public):
            continue  # the package itself, or one of its public names
        bad.append(f"{me} imports {module}.{name}" if name != "*" else f"{me} imports {module}")
    return bad


def test_past_the_seam_sees_each_way_in() -> None:
    imports = [
        ("store", "Store"),
        ("store", "*"),
        ("store", "hidden"),
        ("store._meta", "MetaStore"),
        ("store._objects", "*"),
        ("storey", "x"),
    ]
    assert past_the_seam("ops._x", imports, {"Store"}) == [
        "ops._x imports store.hidden",
        "ops._x imports store._meta.MetaStore",
        "ops._x imports store._objects",
    ]


def test_ops_the_api_and_scan_see_the_store_only_through_its_public_names() -> None:
    from takeback import store

    public = set(store.__all__)
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        me = module_name(path) or "__init__"
        if me.split(".")[0] in SEAM_USERS:
            bad += past_the_seam(me, imported_names(path), public)
    # The root's names loaded on first use are imported by their module's name.
    lazy = [(where, name) for name, where in takeback._WHERE.items()]
    bad += past_the_seam("__init__ (loaded on first use)", lazy, public)
    assert bad == []


#: The most lines a module may have (STYLE.md 5: split a module before it passes about
#: 800 lines), and in ``scan/``, the performance core, where a newcomer reads the most
#: state at once, fewer.
MAX_LINES = 800
MAX_LINES_IN = {"scan": 600}


def oversized(root: Path) -> list[str]:
    """Return each module below ``root`` longer than its limit, with its count."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        limit = MAX_LINES_IN.get(rel.parts[0], MAX_LINES) if len(rel.parts) > 1 else MAX_LINES
        count = len(path.read_text().splitlines())
        if count > limit:
            found.append(f"{rel.as_posix()}: {count} lines (at most {limit})")
    return found


def test_oversized_sees_each_limit(tmp_path: Path) -> None:
    (tmp_path / "scan").mkdir()
    (tmp_path / "ops").mkdir()
    (tmp_path / "scan" / "_big.py").write_text("x = 1\n" * 601)
    (tmp_path / "scan" / "_fits.py").write_text("x = 1\n" * 600)
    (tmp_path / "ops" / "_big.py").write_text("x = 1\n" * 801)
    (tmp_path / "ops" / "_fits.py").write_text("x = 1\n" * 800)
    (tmp_path / "scan.py").write_text("x = 1\n" * 700)
    assert oversized(tmp_path) == [
        "ops/_big.py: 801 lines (at most 800)",
        "scan/_big.py: 601 lines (at most 600)",
    ]


def test_no_module_is_too_big_to_read() -> None:
    over = oversized(PKG)
    assert over == [], "split these modules along their seams: " + "; ".join(over)


def test_public_names_are_sorted_and_real() -> None:
    assert takeback.__all__ == sorted(takeback.__all__)
    for name in takeback.__all__:
        assert getattr(takeback, name) is not None


def test_every_error_carries_a_documented_exit_code() -> None:
    readme = (PKG.parent.parent / "README.md").read_text()
    classes = [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, errors.TakebackError)
    ]
    assert len(classes) >= 10
    for cls in classes:
        assert cls.__name__.endswith("Error")
        assert cls.exit_code in (1, 2, 3)
        assert f"| {cls.exit_code} |" in readme
        assert cls.__name__ in (errors.__doc__ or "")
    by_meaning = {errors.RestoreError: 1, errors.RefError: 2, errors.ConflictError: 3}
    for cls, code in by_meaning.items():
        assert cls.exit_code == code


def _module_graph() -> dict[str, set[str]]:
    """Every module of the package and the package modules it imports (any import at all:
    at the top, inside a function, or for type checking only)."""
    names = {".".join(p.relative_to(PKG).with_suffix("").parts) for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        mod = ".".join(path.relative_to(PKG).with_suffix("").parts)
        package = mod.split(".")[:-1] if path.name != "__init__.py" else mod.split(".")[:-1]
        edges: set[str] = set()
        for node in nodes(path):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
                for alias in node.names:
                    sub = f"{target}.{alias.name}" if target else alias.name
                    known = sub in names or f"{sub}.__init__" in names
                    targets.append(sub if known else target)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("takeback"):
                targets.append(str(node.module).removeprefix("takeback").lstrip("."))
            for t in targets:
                t = t or "__init__"
                if t not in names and f"{t}.__init__" in names:
                    t = f"{t}.__init__"
                if t in names and t != mod:
                    edges.add(t)
        graph[mod] = edges
    return graph


def test_no_module_imports_itself_back() -> None:
    graph = _module_graph()
    cycles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt) :] + [nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [mod])
    assert cycles == []
