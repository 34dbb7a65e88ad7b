"""sort_metadata: the same tensors and metadata give the same bytes, whatever order safetensors wrote."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from nasrlm._safetensors import sort_metadata

ARRAYS = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(3, dtype=np.float64)}
METADATA = {f"key{k}": "é" * k for k in range(8)}  # eight keys: the writer's order varies with each save


def test_saves_with_the_same_metadata_are_byte_identical_and_still_load(tmp_path: Path) -> None:
    files = [tmp_path / f"{k}.safetensors" for k in range(4)]
    for file in files:
        save_file(ARRAYS, str(file), metadata=METADATA)
        sort_metadata(file)
    assert len({file.read_bytes() for file in files}) == 1
    with safe_open(str(files[0]), "np") as f:
        assert f.metadata() == METADATA
        for name, array in ARRAYS.items():
            np.testing.assert_array_equal(f.get_tensor(name), array)


def test_a_file_without_metadata_is_left_as_it_is(tmp_path: Path) -> None:
    file = tmp_path / "plain.safetensors"
    save_file(ARRAYS, str(file))
    before = file.read_bytes()
    sort_metadata(file)
    assert file.read_bytes() == before
