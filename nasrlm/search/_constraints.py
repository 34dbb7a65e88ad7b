"""A limit on a quantity a search measures, ``pixel3<=10``: what ``nasrlm search --constraint`` parses, and
the value each trial gives Optuna's ``trial.set_constraint`` (feasible at 0 or less, Optuna's convention), so
that any sampler that honours constraints (ours, TPE, NSGA-II, GP) searches under it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from nasrlm.errors import NasrlmError

#: The comparisons a constraint may make: at most, at least.
OPERATORS = ("<=", ">=")


class UnmeetableConstraintError(NasrlmError, ValueError):
    """No architecture of the table that covers the space meets the constraints: a search could find none."""


_PATTERN = re.compile(r"^\s*([^<>=\s]+)\s*(<=|>=)\s*(\S+)\s*$")


@dataclass(frozen=True)
class Constraint:
    """``quantity`` at most (``"<="``) or at least (``">="``) ``limit``, in the quantity's own unit."""

    quantity: str
    operator: str
    limit: float

    def __post_init__(self) -> None:
        if self.operator not in OPERATORS:
            raise ValueError(f"constraint operator {self.operator!r}: expected one of {', '.join(OPERATORS)}")
        if not math.isfinite(self.limit):
            raise ValueError(f"constraint {self.quantity}{self.operator}{self.limit}: the limit must be "
                             "finite")

    @classmethod
    def parse(cls, text: str) -> Constraint:
        """``"pixel3<=10"`` (spaces allowed) as a constraint; ``ValueError`` naming the text otherwise."""
        match = _PATTERN.match(text)
        if match is None:
            raise ValueError(f"constraint {text!r}: expected NAME<=LIMIT or NAME>=LIMIT, e.g. 'pixel3<=10'")
        quantity, operator, limit = match.groups()
        try:
            value = float(limit)
        except ValueError:
            raise ValueError(f"constraint {text!r}: the limit {limit!r} is not a number") from None
        return cls(quantity, operator, value)

    @property
    def name(self) -> str:
        """The constraint as written back, ``pixel3<=10``: its name in the study (``trial.constraints``), the
        limit to the last digit (:meth:`parse` reads it back exactly)."""
        limit = repr(float(self.limit))
        return f"{self.quantity}{self.operator}{limit.removesuffix('.0')}"

    def value(self, quantity: float) -> float:
        """What the trial tells Optuna: how far ``quantity`` is beyond the limit (0 or less: met)."""
        return quantity - self.limit if self.operator == "<=" else self.limit - quantity

    def __str__(self) -> str:
        return self.name
