"""The daemon's parts (``watcher.service``) are given what they use by the composition root
(``watcher.app``), which imports them: none of them imports it back, not even for types."""

from __future__ import annotations

from pathlib import Path

import watcher.service

from support.imports import imported_modules

SERVICE = Path(watcher.service.__file__).parent


def test_no_service_module_imports_the_composition_root() -> None:
    modules = sorted(SERVICE.glob("*.py"))
    assert len(modules) > 10
    imports = imported_modules(modules)
    back = {p.name: [n for n in imports[p] if n.startswith("watcher.app")] for p in modules}
    assert {name: names for name, names in back.items() if names} == {}
