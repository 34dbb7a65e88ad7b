"""Checks that every table loader makes the same way: objective names, extra (measured) columns."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from nasrlm.data._table import Objective
from nasrlm.errors import NasrlmError

Extra = Mapping[str, tuple[Objective, Mapping[str, float]]]


class UnknownObjectiveError(NasrlmError, KeyError, ValueError):
    """An objective name that no source provides; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def checked_extra(extra: Extra | None, builtin: Mapping[str, object], what: str) -> dict:
    """``extra`` as a dict, refused where a name shadows a built-in objective or disagrees with its key."""
    out = dict(extra or {})
    for name, (obj, _) in out.items():
        if name in builtin:
            raise ValueError(f"extra objective {name!r} shadows a built-in {what} objective; rename it")
        if obj.name != name:
            raise ValueError(f"extra objective keyed {name!r} is named {obj.name!r}")
    return out


def require_names(names: Sequence[str], builtin: Mapping[str, object], what: str) -> None:
    """At least one objective named (for loaders whose tables need a column)."""
    if not names:
        raise ValueError(f"no {what} objective named; choose from {', '.join(builtin)}")


def check_names(names: Sequence[str], builtin: Mapping[str, object], extra: Mapping[str, object],
                what: str) -> None:
    """No name twice, each built in or extra (else a did-you-mean listing all names)."""
    if len(set(names)) != len(names):
        raise ValueError(f"objective listed twice: {[n for n in names if names.count(n) > 1][0]!r}")
    valid = [*builtin, *extra]
    for name in names:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=3)
            hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
            raise UnknownObjectiveError(f"unknown {what} objective {name!r}{hint}; valid names: "
                                        f"{', '.join(valid)}")


def extra_ids(extra: Extra, known: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Ids that some extra column has a value for and ``known`` lacks, sorted."""
    return sorted({i for _, values in extra.values() for i in values} - set(known))
