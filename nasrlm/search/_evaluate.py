"""What a search evaluates: objective values of an architecture id, from tables or measured live.

An objective named like a device profile (``cpu-1t-b1``) is measured on this machine with onnxruntime
the first time an architecture needs it and kept in a :class:`~nasrlm.measure.LatencyStore`;
``val_acc`` is measured by training the architecture's network (a
:class:`~nasrlm.search._training.NetworkTrainer`); ``params_m`` and ``macs_m`` are computed from its
ONNX graph where the space publishes no such column (every space has them); any other name is a
published column read through :func:`nasrlm.data.load_table` (which knows the data directory and the
pip-installed fallbacks). The kinds mix freely: ``acc,cpu-1t-b1`` is the fresh-machine demo,
``val_acc,cpu-1t-b1`` trains and times, ``params_m,cpu-1t-b1`` works for a space of your own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from nasrlm.data import BenchmarkTable, Objective, load_table
from nasrlm.free_labels import FREE_OBJECTIVES, computed_objectives, free_labels
from nasrlm.measure import LatencyStore, is_profile, measure_archs, measured_objective
from nasrlm.search._training import TRAINED, NetworkTrainer
from search_spaces import SearchSpace


class MissingValueError(LookupError):
    """The table has no value of an objective for the architecture (the trial fails, the search goes on)."""


class ArchEvaluator:
    """Callable ``arch_id -> [value per objective]``; every value in its objective's unit."""

    def __init__(self, space: SearchSpace, objectives: Sequence[Objective],
                 table: BenchmarkTable | None = None, store: LatencyStore | None = None, *,
                 trainer: NetworkTrainer | None = None, computed: Sequence[str] = (), warmup: int = 10,
                 runs: int = 50) -> None:
        self.space = space
        self.objectives = list(objectives)
        self.table = table
        self.store = store
        self.trainer = trainer
        #: objectives computed from each architecture's graph (:data:`~nasrlm.free_labels.FREE_OBJECTIVES`)
        self.computed = [n for n in computed if n in {o.name for o in FREE_OBJECTIVES}]
        self.warmup, self.runs = warmup, runs
        self._row = {arch_id: k for k, arch_id in enumerate(table.ids)} if table is not None else {}
        for o in self.objectives:
            if o.name == TRAINED:
                if trainer is None:
                    raise ValueError(f"objective {TRAINED!r} is measured by training networks and needs a "
                                     "trainer (nasrlm search --train DATASET)")
            elif is_profile(o.name):
                if store is None:
                    raise ValueError(f"objective {o.name!r} is measured live and needs a latency store")
            elif o.name in self.computed:
                pass
            elif table is None or o.name not in table.names:
                raise ValueError(f"objective {o.name!r} is neither a device profile nor a table column")

    @classmethod
    def for_names(cls, space: SearchSpace, names: Sequence[str], *,
                  data_dir: str | os.PathLike[str] | None = None, store: LatencyStore | None = None,
                  trainer: NetworkTrainer | None = None) -> ArchEvaluator:
        """Resolve objective names: device profiles are measured into ``store``, ``val_acc`` by ``trainer``,
        ``params_m`` and ``macs_m`` computed where no table publishes them, the rest read from tables."""
        names = list(names)
        if not names:
            raise ValueError("a search needs at least one objective")
        if len(set(names)) != len(names):
            raise ValueError(f"objectives repeat: {names}")
        measured = [n for n in names if is_profile(n)]
        if measured and store is None:
            raise ValueError(f"objective {measured[0]!r} is measured live and needs a latency store")
        if TRAINED in names and trainer is None:
            raise ValueError(f"objective {TRAINED!r} is measured by training networks: give a dataset "
                             "(nasrlm search --train DATASET)")
        computed = {o.name: o for o in computed_objectives(space, names, data_dir)}
        published = [n for n in names if n not in measured and n != TRAINED and n not in computed]
        table = load_table(space.name, published, data_dir) if published else None
        columns = {o.name: o for o in table.objectives} if table is not None else {}
        columns.update(computed)
        for name in measured:
            columns[name] = measured_objective(store, space.name, name)[0]  # type: ignore[arg-type]
        if trainer is not None and TRAINED in names:
            columns[TRAINED] = trainer.objective
        return cls(space, [columns[n] for n in names], table, store, trainer=trainer, computed=list(computed))

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.objectives]

    @property
    def maximize(self) -> list[bool]:
        return [o.higher_is_better for o in self.objectives]

    def __call__(self, arch_id: str) -> list[float]:
        values = []
        computed = {}  # the free labels, described once for every objective that reads them
        if self.computed:
            row = free_labels(self.space, [arch_id])[0].tolist()
            computed = dict(zip((f.name for f in FREE_OBJECTIVES), row, strict=True))
        for o in self.objectives:
            if o.name == TRAINED:
                values.append(self.trainer(arch_id))  # type: ignore[misc]
                continue
            if o.name in self.computed:
                values.append(computed[o.name])
                continue
            if is_profile(o.name):
                result = measure_archs(self.space, [arch_id], o.name, self.store,  # type: ignore[arg-type]
                                       warmup=self.warmup, runs=self.runs, progress=False)
                values.append(result[arch_id].median_ms)
                continue
            row = self._row.get(arch_id)
            value = np.nan if row is None else self.table.values[row, self.table.names.index(o.name)]  # type: ignore[union-attr]
            if not np.isfinite(value):
                raise MissingValueError(f"no {o.name} value for {self.space.name} architecture {arch_id}")
            values.append(float(value))
        return values

    def tabulated(self) -> tuple[list[str], np.ndarray] | None:
        """The table's architectures with every objective known (ids, values); ``None`` if any is live."""
        if self.table is None or any(is_profile(n) or n == TRAINED or n in self.computed for n in self.names):
            return None
        columns = [self.table.names.index(n) for n in self.names]
        values = self.table.values[:, columns]
        known = np.isfinite(values).all(axis=1)
        return [i for i, k in zip(self.table.ids, known, strict=True) if k], values[known]

    def truth(self) -> tuple[list[str], np.ndarray] | None:
        """Every architecture with all objectives known (ids, values): the true front comes from it.

        ``None`` when an objective is measured live (nobody has measured the whole space) or the
        table does not cover the space.
        """
        tabulated = self.tabulated()
        if tabulated is None or self.space.size is None or len(tabulated[0]) < self.space.size:
            return None
        return tabulated
