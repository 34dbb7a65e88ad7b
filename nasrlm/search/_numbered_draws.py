"""Random architectures by trial number: a study's start-up trials the same whatever its number of workers.

Optuna's ``RandomSampler`` draws from one stream per process: which architecture a trial gets depends on
how many its worker drew before, so four workers given one seed draw the same four first trials, and
four given four seeds start from other trials than one worker does. :class:`NumberedDraws` draws the
stream once, in order, as one worker's ``RandomSampler(seed)`` would (each draw the parameters that
``space.suggest`` asks for), and gives trial ``n`` the ``n``-th: workers sharing a seed then start a
study from the very trials one worker would (one worker's trials stay as they were), and never from the
same one twice. Why it matters: experiments/README.md, "Many workers on one study".
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import RandomSampler

from search_spaces import SearchSpace


class NumberedDraws:
    """The ``n``-th random architecture of ``space``'s stream seeded ``seed``, as parameters."""

    def __init__(self, space: SearchSpace, seed: int) -> None:
        self.space = space
        self.seed = seed
        self._study: optuna.Study | None = None  # the stream: an in-memory study, made at the first draw
        self._params: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # Optuna's n_jobs threads share a sampler

    def params(self, number: int) -> dict[str, Any]:
        """The parameters of the ``number``-th draw (from 0), drawn with every one before it, once."""
        with self._lock:
            while len(self._params) <= number:
                trial = self._stream().ask()
                try:
                    self.space.suggest(trial)
                finally:  # a draw the space cannot build keeps its place: the trial fails on it, as before
                    self._params.append(dict(trial.params))
            return self._params[number]

    def value(self, number: int, name: str, distribution: BaseDistribution) -> tuple[bool, Any]:
        """``(True, value)`` of parameter ``name`` in the ``number``-th draw where it has one inside
        ``distribution``; ``(False, None)`` where not (a parameter the objective asks for beside the
        space's, or one a conditional space drew with another range)."""
        params = self.params(number)
        if name not in params:
            return False, None
        value = params[name]
        try:  # Optuna's own check, as its FixedTrial makes it
            inside = distribution._contains(distribution.to_internal_repr(value))
        except ValueError:  # a choice the distribution lacks
            inside = False
        return (True, value) if inside else (False, None)

    def _stream(self) -> optuna.Study:
        if self._study is None:
            optuna_logger = logging.getLogger("optuna")
            level = optuna_logger.level
            optuna_logger.setLevel(logging.WARNING)  # not "A new study created in memory" in a user's log
            try:
                self._study = optuna.create_study(sampler=RandomSampler(seed=self.seed))
            finally:
                optuna_logger.setLevel(level)
        return self._study
