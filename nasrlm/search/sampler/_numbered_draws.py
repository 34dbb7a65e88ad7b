"""Random architectures by trial number: a study's start-up trials the same whatever its number of workers.

Optuna's ``RandomSampler`` draws from one stream per process: which architecture a trial gets depends on
how many its worker drew before, so four workers given one seed draw the same first trial four times, and
four given four seeds start from other trials than one worker does. :class:`NumberedDraws` draws the
stream once, in order, as one worker's ``RandomSampler(seed)`` would (each draw the parameters that
``space.suggest`` asks for), and gives trial ``n`` the ``n``-th: workers sharing a seed then start a
study from the very trials one worker would (one worker's trials stay as they were), and never take the
same draw twice. Why it matters: experiments/README.md, "Many workers on one study".

The stream is drawn up to the largest number asked for, once per process, in an in-memory Optuna study
(each draw scans the ones before it): milliseconds for the first hundreds of trials, more for a random
draw first asked at trial tens of thousands.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import zlib
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import RandomSampler
from optuna.study import Study
from optuna.trial import FrozenTrial

from search_spaces import SearchSpace


class NumberedDraws:
    """The ``n``-th random architecture of ``space``'s stream seeded ``seed``, as parameters."""

    def __init__(self, space: SearchSpace, seed: int) -> None:
        self.space = space
        self.seed = seed
        self._sampler = RandomSampler(seed=seed)  # the stream's draws, in order
        self._study: optuna.Study | None = None  # the stream as an in-memory study, made at the first draw
        self._params: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # Optuna's n_jobs threads share a sampler

    def __getstate__(self) -> dict[str, Any]:
        """What a pickle keeps: the draws so far and the stream's sampler where it stands (the in-memory
        study and the lock are this process's, made again on load)."""
        return {k: v for k, v in vars(self).items() if k not in ("_study", "_lock")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state, _study=None, _lock=threading.Lock())

    def params(self, number: int) -> dict[str, Any]:
        """The parameters of the ``number``-th draw (from 0), drawn with every one before it, once."""
        with self._lock:
            while len(self._params) <= number:
                trial = self._stream().ask()
                # a draw the space cannot build keeps its place, with the values drawn up to the
                # failure: the trial given it fails in its own space.suggest on the same values
                with contextlib.suppress(Exception):
                    self.space.suggest(trial)
                self._params.append(dict(trial.params))
            return self._params[number]

    def sample(self, study: Study, trial: FrozenTrial, name: str, distribution: BaseDistribution) -> Any:
        """Parameter ``name`` of ``trial``: its value in the trial's draw where that has one inside
        ``distribution``; else (a parameter the objective asks for beside the space's, or one a
        conditional space drew with another range) a uniform draw seeded by the seed, the trial's number
        and the name, so that workers sharing the seed never draw alike either."""
        params = self.params(trial.number)
        if name in params and _inside(params[name], distribution):
            return params[name]
        key = np.random.SeedSequence([self.seed, trial.number, zlib.crc32(name.encode())]).generate_state(1)
        return RandomSampler(seed=int(key[0])).sample_independent(study, trial, name, distribution)

    def _stream(self) -> optuna.Study:
        if self._study is None:
            optuna_logger = logging.getLogger("optuna")
            level = optuna_logger.level
            optuna_logger.setLevel(logging.WARNING)  # not "A new study created in memory" in a user's log
            try:
                self._study = optuna.create_study(sampler=self._sampler)
            finally:
                optuna_logger.setLevel(level)
        return self._study


def _inside(value: Any, distribution: BaseDistribution) -> bool:
    """Whether ``distribution`` holds ``value``: Optuna's own check (private; its ``FixedTrial`` makes it)."""
    try:
        return bool(distribution._contains(distribution.to_internal_repr(value)))
    except ValueError:  # a choice the distribution lacks
        return False
