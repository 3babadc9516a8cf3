"""What a source file imports, read from its syntax tree in a fresh interpreter.

In a fresh process because CPython 3.11 before 3.11.8 can fail ``ast.parse`` with "AST
constructor recursion depth mismatch" once the process has caught a RecursionError, and other
tests in the same worker do that on purpose (deeply nested JSON answers)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

_READ = """
import ast, json, sys
out = {}
for path in sys.argv[1:]:
    names = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    out[path] = sorted(names)
print(json.dumps(out))
"""


def imported_modules(paths: Sequence[Path]) -> dict[Path, set[str]]:
    """Every module each file imports, wherever the import stands (a TYPE_CHECKING block too),
    with ``module.name`` for each name a ``from module import name`` takes."""
    done = subprocess.run(
        [sys.executable, "-c", _READ, *map(str, paths)],
        check=True,
        capture_output=True,
        text=True,
    )
    return {Path(path): set(names) for path, names in json.loads(done.stdout).items()}


def fresh_output(code: str) -> str:
    """What ``code`` prints run in a fresh interpreter (what a start imports, say), stripped."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()
