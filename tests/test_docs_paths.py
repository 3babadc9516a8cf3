"""Every file of the repository that the docs name by its path exists: a module moved or renamed
leaves no stale path in docs/*.md, CONTRIBUTING.md, README.md or bench/README.md."""

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


def test_the_paths_in_the_drawing_are_found() -> None:
    assert "service/target_pipeline.py" in _named(REPO / "docs/design.md")
