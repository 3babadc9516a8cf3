"""The daemon's parts (``watcher.service``) are given what they use by the composition root
(``watcher.app``), which imports them: none of them imports it back, not even for types."""

from __future__ import annotations

import ast
from pathlib import Path

import watcher.service

SERVICE = Path(watcher.service.__file__).parent


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, wherever the import stands (a TYPE_CHECKING block too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_service_module_imports_the_composition_root() -> None:
    modules = sorted(SERVICE.glob("*.py"))
    assert len(modules) > 10
    back = {p.name: [n for n in imported(p) if n.startswith("watcher.app")] for p in modules}
    assert {name: names for name, names in back.items() if names} == {}
