"""Data-directory resolution and the missing-file error."""

from __future__ import annotations

from pathlib import Path

import pytest

from nasrlm.data import DataFileNotFoundError, data_file, resolve_data_dir


def test_explicit_argument_wins_over_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit, from_env = tmp_path / "a", tmp_path / "b"
    explicit.mkdir()
    from_env.mkdir()
    monkeypatch.setenv("NASRLM_DATA", str(from_env))
    assert resolve_data_dir(explicit) == explicit
    assert resolve_data_dir(str(explicit)) == explicit
    assert resolve_data_dir(None) == from_env


def test_none_without_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NASRLM_DATA", raising=False)
    assert resolve_data_dir(None) is None
    monkeypatch.setenv("NASRLM_DATA", "")
    assert resolve_data_dir(None) is None


def test_missing_directory_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(DataFileNotFoundError, match="does not exist") as info:
        resolve_data_dir(missing)
    assert isinstance(info.value, FileNotFoundError)
    assert str(missing) in str(info.value)
    monkeypatch.setenv("NASRLM_DATA", str(missing))
    with pytest.raises(DataFileNotFoundError, match="NASRLM_DATA"):
        resolve_data_dir(None)


def test_data_file_found(tmp_path: Path) -> None:
    (tmp_path / "nb201").mkdir()
    (tmp_path / "nb201" / "archs.csv").write_text("nb201_index,arch_str\n")
    assert data_file(tmp_path, "nb201/archs.csv") == tmp_path / "nb201" / "archs.csv"


def test_missing_file_message_names_file_dir_and_remedy(tmp_path: Path) -> None:
    with pytest.raises(DataFileNotFoundError) as info:
        data_file(tmp_path, "nb201/latency_ms.csv")
    msg = str(info.value)
    assert "nb201/latency_ms.csv" in msg and str(tmp_path) in msg
    assert "--data-dir DIR" in msg and "NASRLM_DATA" in msg
    assert "\n" not in msg and "http" not in msg


def test_missing_file_without_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NASRLM_DATA", raising=False)
    with pytest.raises(DataFileNotFoundError, match="no data directory was given") as info:
        data_file(None, "nb201/archs.csv")
    assert "nb201/archs.csv" in str(info.value) and "--data-dir DIR" in str(info.value)


def test_a_directory_is_not_a_data_file(tmp_path: Path) -> None:
    (tmp_path / "nb201").mkdir()
    with pytest.raises(DataFileNotFoundError):
        data_file(tmp_path, "nb201")
