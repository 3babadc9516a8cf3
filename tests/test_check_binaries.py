"""deploy/check-binaries: the tree holds no binary file but the simulator's recorded answers."""

import gzip
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "deploy" / "check-binaries"


def check(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(repo)], capture_output=True, text=True, check=False
    )


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_this_tree_holds_no_stray_binary() -> None:
    result = check(REPO)
    assert result.returncode == 0, result.stderr


def test_a_committed_wheel_is_refused_by_name(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    data = tmp_path / "watcher" / "simulator" / "data"
    data.mkdir(parents=True)
    (data / "recorded.json.gz").write_bytes(gzip.compress(b"[]", mtime=0))
    (tmp_path / "tool-1.0-py3-none-any.whl").write_bytes(b"PK\x03\x04\x00\x00binary")
    (tmp_path / "notes.md").write_text("text\n")
    git(tmp_path, "add", ".")
    result = check(tmp_path)
    assert result.returncode == 1
    assert "tool-1.0-py3-none-any.whl: binary file in the tree" in result.stderr
    assert "recorded.json.gz" not in result.stderr
    assert "notes.md" not in result.stderr
