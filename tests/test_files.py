"""bench.files.replace_whole: a shared cache is replaced whole or left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.files import replace_whole


def test_a_file_is_replaced_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "peak.json"  # its directory is made
    replace_whole(path, json.dumps({"a": 1}))
    replace_whole(path, json.dumps({"a": 1, "b": 2}))
    assert json.loads(path.read_text()) == {"a": 1, "b": 2}
    assert [p.name for p in path.parent.iterdir()] == ["peak.json"]


def test_a_write_that_fails_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    path = tmp_path / "peak.json"
    replace_whole(path, '{"a": 1}')
    with pytest.raises(TypeError):
        replace_whole(path, None)  # type: ignore[arg-type]
    assert path.read_text() == '{"a": 1}'
    assert [p.name for p in tmp_path.iterdir()] == ["peak.json"]
