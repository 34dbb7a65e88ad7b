"""Benchmark data: where it lives, how it is read, and the tidy tables nasrlm works with.

Nothing here imports torch; reading a table costs at most a couple of seconds.
"""

from nasrlm.data._analog import load_analog_nasbench
from nasrlm.data._datadir import DataFileError, DataFileNotFoundError, data_file, resolve_data_dir
from nasrlm.data._loader_utils import UnknownObjectiveError
from nasrlm.data._nb201 import NB201_OBJECTIVES, available_nb201_objectives, load_nb201
from nasrlm.data._nds import load_nds_json
from nasrlm.data._table import BenchmarkTable, Objective
from nasrlm.data._tables import TABLE_LOADERS, available_objectives, load_table

__all__ = [
    "NB201_OBJECTIVES",
    "TABLE_LOADERS",
    "BenchmarkTable",
    "DataFileError",
    "DataFileNotFoundError",
    "Objective",
    "UnknownObjectiveError",
    "available_nb201_objectives",
    "available_objectives",
    "data_file",
    "load_analog_nasbench",
    "load_nb201",
    "load_nds_json",
    "load_table",
    "resolve_data_dir",
]
