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
from collections import Counter
from collections.abc import Sequence

import numpy as np

from nasrlm.data import BenchmarkTable, Objective, load_table
from nasrlm.free_labels import FREE_LABEL_NAMES, FREE_OBJECTIVES, computed_objectives, free_labels
from nasrlm.measure import LatencyStore, is_profile, measure_archs, measured_objective
from nasrlm.search._constraints import Constraint
from nasrlm.search._training import TRAINED, NetworkTrainer
from search_spaces import SearchSpace


class MissingValueError(LookupError):
    """The table has no value of an objective for the architecture (the trial fails, the search goes on)."""


class ArchEvaluator:
    """Callable ``arch_id -> [value per objective]``; every value in its objective's unit.

    With ``constraints`` (:class:`~nasrlm.search._constraints.Constraint`) it also measures each constrained
    quantity (an objective, or one of ``limited`` beside them) and says how far each constraint is from being
    met (:meth:`measure`)."""

    def __init__(self, space: SearchSpace, objectives: Sequence[Objective],
                 table: BenchmarkTable | None = None, store: LatencyStore | None = None, *,
                 trainer: NetworkTrainer | None = None, computed: Sequence[str] = (), warmup: int = 10,
                 runs: int = 50, constraints: Sequence[Constraint] = (),
                 limited: Sequence[Objective] = ()) -> None:
        self.space = space
        self.objectives = list(objectives)
        self.constraints = list(constraints)
        #: the constrained quantities that are not objectives, measured beside them
        self.limited = [o for o in limited if o.name not in self.names]
        unknown = [c.name for c in self.constraints if c.quantity not in [o.name for o in self.quantities]]
        if unknown:
            raise ValueError(f"constraint {unknown[0]}: its quantity is neither an objective nor measured "
                             "beside them")
        self.table = table
        self.store = store
        self.trainer = trainer
        #: objectives computed from each architecture's graph (:data:`~nasrlm.free_labels.FREE_OBJECTIVES`)
        self.computed = [n for n in computed if n in FREE_LABEL_NAMES]
        self.warmup, self.runs = warmup, runs
        self._row = {arch_id: k for k, arch_id in enumerate(table.ids)} if table is not None else {}
        for o in self.quantities:
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
                  trainer: NetworkTrainer | None = None, constraints: Sequence[Constraint] = ()
                  ) -> ArchEvaluator:
        """Resolve objective names, and the quantities of ``constraints``: device profiles are measured into
        ``store``, ``val_acc`` by ``trainer``, ``params_m`` and ``macs_m`` computed where no table publishes
        them, the rest read from tables."""
        objectives = list(names)
        if not objectives:
            raise ValueError("a search needs at least one objective")
        if len(set(objectives)) != len(objectives):
            raise ValueError(f"objectives repeat: {objectives}")
        repeated = [name for name, n in Counter(c.name for c in constraints).items() if n > 1]
        if repeated:
            raise ValueError(f"constraint {repeated[0]} is given twice")
        names = list(dict.fromkeys([*objectives, *(c.quantity for c in constraints)]))
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
        return cls(space, [columns[n] for n in objectives], table, store, trainer=trainer,
                   computed=list(computed), constraints=constraints,
                   limited=[columns[n] for n in names if n not in objectives])

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.objectives]

    @property
    def maximize(self) -> list[bool]:
        return [o.higher_is_better for o in self.objectives]

    @property
    def quantities(self) -> list[Objective]:
        """What is measured of each architecture: the objectives, then the other constrained quantities."""
        return [*self.objectives, *self.limited]

    def __call__(self, arch_id: str) -> list[float]:
        return self._values(arch_id, self.objectives)

    def measure(self, arch_id: str) -> tuple[list[float], dict[str, float]]:
        """The objective values of ``arch_id`` (``self(arch_id)``), and by name each constraint's value (how
        far the quantity is beyond its limit: met at 0 or less), as ``trial.set_constraint`` takes them."""
        values = self(arch_id)
        measured = dict(zip((o.name for o in self.quantities),
                            [*values, *self._values(arch_id, self.limited)], strict=True))
        return values, {c.name: c.value(measured[c.quantity]) for c in self.constraints}

    def _values(self, arch_id: str, quantities: Sequence[Objective]) -> list[float]:
        values = []
        computed = {}  # the free labels, described once for every objective that reads them
        if any(o.name in self.computed for o in quantities):
            row = free_labels(self.space, [arch_id])[0].tolist()
            computed = dict(zip((f.name for f in FREE_OBJECTIVES), row, strict=True))
        for o in quantities:
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

    def tabulated(self) -> tuple[list[str], np.ndarray, np.ndarray] | None:
        """The table's architectures with every objective and constrained quantity known: their ids, objective
        values and constraint values (each (rows, ...)); ``None`` if any is measured live or computed."""
        names = [o.name for o in self.quantities]
        if self.table is None or any(is_profile(n) or n == TRAINED or n in self.computed for n in names):
            return None
        values = self.table.values[:, [self.table.names.index(n) for n in names]]
        known = np.isfinite(values).all(axis=1)
        values = values[known]
        limits = np.column_stack([c.value(values[:, names.index(c.quantity)]) for c in self.constraints]
                                 or [np.zeros((len(values), 0))])
        ids = [i for i, k in zip(self.table.ids, known, strict=True) if k]
        return ids, values[:, : len(self.objectives)], limits

    def truth(self) -> tuple[list[str], np.ndarray, np.ndarray] | None:
        """Every architecture with all objectives known (ids, values, constraint values): the true front, and
        the best feasible architectures, come from it.

        ``None`` when an objective is measured live (nobody has measured the whole space) or the
        table does not cover the space.
        """
        tabulated = self.tabulated()
        if tabulated is None or self.space.size is None or len(tabulated[0]) < self.space.size:
            return None
        return tabulated
