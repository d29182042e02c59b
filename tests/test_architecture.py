"""The layering of ARCHITECTURE.md, the curated public names, and the exit codes, checked."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import takeback
from takeback import errors

PKG = Path(takeback.__file__).resolve().parent

# Lower number = lower layer; a module may import only from its own layer or below.
LAYERS = {
    "errors": 0, "_types": 0, "_fs": 0,
    "model": 1,
    "store": 2, "scan": 2,
    "ops": 3,
    "workspace": 4, "_session": 4, "__init__": 4, "__main__": 7,
    "integrations": 5,
    "cli": 6,
}


def layer_of(module: str) -> int:
    return LAYERS[module.split(".")[0]]


def imports_of(path: Path) -> list[str]:
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
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


def test_public_names_are_sorted_and_real() -> None:
    assert takeback.__all__ == sorted(takeback.__all__)
    for name in takeback.__all__:
        assert getattr(takeback, name) is not None


def test_every_error_carries_a_documented_exit_code() -> None:
    readme = (PKG.parent.parent / "README.md").read_text()
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, errors.TakebackError)]
    assert len(classes) >= 10
    for cls in classes:
        assert cls.__name__.endswith("Error")
        assert cls.exit_code in (1, 2, 3)
        assert f"| {cls.exit_code} |" in readme
        assert cls.__name__ in (errors.__doc__ or "")
    by_meaning = {errors.RestoreError: 1, errors.RefError: 2, errors.ConflictError: 3}
    for cls, code in by_meaning.items():
        assert cls.exit_code == code
