"""Every file of the repository that the docs name by its path, and every module of a package
they name by its dotted name, exists: a module moved or renamed leaves no stale name in
docs/*.md, CONTRIBUTING.md, README.md, bench/README.md, nor in the package's own docstrings and
comments."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [
        *REPO.glob("docs/*.md"),
        REPO / "CONTRIBUTING.md",
        REPO / "README.md",
        REPO / "bench/README.md",
    ]
)
PACKAGES = sorted(p.name for p in (REPO / "watcher").iterdir() if (p / "__init__.py").exists())
# A path of a module, a test or a bench script, written from the repository's root or, for the
# package's own modules, from watcher/ (`service/rounds.py`).
PATH = re.compile(
    r"(?<![\w/.<-])((?:watcher|tests|bench|" + "|".join(PACKAGES) + r")/[\w/]+\.py)\b"
)
# A dotted name in one of the package's own packages (`watcher.budget.cadences`).
MODULE = re.compile(r"(?<![\w./])watcher\.(?:" + "|".join(PACKAGES) + r")(?:\.\w+)+")
# The file CONTRIBUTING's example kind asks the reader to create.
TO_BE_WRITTEN = {"watcher/kinds/low_stake.py"}


def _named(doc: Path) -> list[str]:
    return [m.group(1) for m in PATH.finditer(doc.read_text())]


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(REPO)))
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    missing = [
        path
        for path in _named(doc)
        if path not in TO_BE_WRITTEN
        and not (REPO / path).exists()
        and not (REPO / "watcher" / path).exists()
    ]
    assert missing == [], f"{doc.name} names files that do not exist: {missing}"


def _is_module(name: str) -> bool:
    """Whether ``name``, past its package, is a module or an attribute of the last one found."""
    parts = name.split(".")
    found = max(
        i
        for i in range(2, len(parts) + 1)
        if (REPO.joinpath(*parts[:i]).with_suffix(".py")).exists()
        or (REPO.joinpath(*parts[:i]) / "__init__.py").exists()
    )
    if found == len(parts):
        return True
    module = REPO.joinpath(*parts[:found])
    source = (module / "__init__.py" if module.is_dir() else module.with_suffix(".py")).read_text()
    return re.search(rf"\b{parts[found]}\b", source) is not None


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(REPO)))
def test_every_module_a_doc_names_exists(doc: Path) -> None:
    named = [m.group(0).rstrip(".") for m in MODULE.finditer(doc.read_text())]
    missing = [name for name in named if not _is_module(name)]
    assert missing == [], f"{doc.name} names modules that do not exist: {missing}"


def test_every_module_a_docstring_or_comment_names_exists() -> None:
    named = [
        f"{path.relative_to(REPO)}:{number}: {found.group(0)}"
        for path in sorted((REPO / "watcher").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith(("from ", "import "))
        for found in MODULE.finditer(line)
        if not _is_module(found.group(0))
    ]
    assert named == []


def test_the_paths_in_the_drawing_are_found() -> None:
    assert "service/target_pipeline.py" in _named(REPO / "docs/design.md")
