"""Published tables by search space: one loader per space that has them, found by name."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from nasrlm.data._fbnet import available_fbnet_objectives, load_fbnet
from nasrlm.data._loader_utils import UnknownObjectiveError
from nasrlm.data._nb101 import available_nb101_objectives, load_nb101
from nasrlm.data._nb201 import available_nb201_objectives, load_nb201
from nasrlm.data._nb301 import available_nb301_objectives, load_nb301
from nasrlm.data._nds import NDS_TABLE_LOADERS
from nasrlm.data._ofa import available_ofa_mbv3_objectives, load_ofa_mbv3
from nasrlm.data._table import BenchmarkTable, Objective

#: space name -> (loader, lister of available objectives). Other spaces join here as they gain tables.
TABLE_LOADERS: dict[str, tuple[Callable[..., BenchmarkTable], Callable[..., list[Objective]]]] = {
    "nb201": (load_nb201, available_nb201_objectives),
    "nb301": (load_nb301, available_nb301_objectives),
    **NDS_TABLE_LOADERS,  # nds_amoeba, nds_darts, ..., nds_vanilla
    "nb101": (load_nb101, available_nb101_objectives),
    "fbnet": (load_fbnet, available_fbnet_objectives),
    "ofa_mbv3": (load_ofa_mbv3, available_ofa_mbv3_objectives),
}

Extra = Mapping[str, tuple[Objective, Mapping[str, float]]]


def load_table(space: str, objectives: Sequence[str], data_dir: str | os.PathLike[str] | None = None,
               ids: Sequence[str] | None = None, *, extra: Extra | None = None) -> BenchmarkTable:
    """One table of ``objectives`` for ``space``: published columns plus ``extra`` (measured) ones.

    A space without published tables can still be tabulated from ``extra`` alone: its rows are then
    the ids that have at least one value, in sorted order.
    """
    if space in TABLE_LOADERS:
        return TABLE_LOADERS[space][0](objectives, data_dir, ids, extra=extra)
    extra = dict(extra or {})
    missing = [name for name in objectives if name not in extra]
    if missing:
        raise UnknownObjectiveError(f"search space {space!r} has no published tables, so {missing[0]!r} is "
                                    f"unknown; use measured device profiles such as 'cpu-1t-b1'")
    rows = list(ids) if ids is not None else sorted({i for _, values in extra.values() for i in values})
    columns = [[values.get(i, float("nan")) for i in rows] for _, values in (extra[n] for n in objectives)]
    return BenchmarkTable(space, rows, [extra[n][0] for n in objectives],
                          np.array(columns, dtype=np.float64).T.reshape(len(rows), len(objectives)))


def available_objectives(space: str, data_dir: str | os.PathLike[str] | None = None) -> list[Objective]:
    """Published objectives of ``space`` given ``data_dir`` (measured profiles come on top)."""
    return TABLE_LOADERS[space][1](data_dir) if space in TABLE_LOADERS else []
