"""Find search spaces by name: built-ins, ``register``-ed ones, and installed plug-ins.

Third-party packages expose spaces through the entry-point group ``nasrlm.search_spaces``
(``myspace = "my_package.spaces:MySpace"``); a factory is anything that returns a
:class:`~search_spaces.SearchSpace` when called with no arguments.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from importlib.metadata import entry_points

from search_spaces._base import SearchSpace

ENTRY_POINT_GROUP = "nasrlm.search_spaces"

_FACTORIES: dict[str, Callable[[], SearchSpace]] = {}


class UnknownSpaceError(KeyError, ValueError):
    """Raised for a name that no built-in, registered or installed space has."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def register_space(name: str, factory: Callable[[], SearchSpace], *, overwrite: bool = False) -> None:
    """Make ``get_space(name)`` return ``factory()``; refuses to shadow a name unless asked."""
    if not name or name != name.strip() or " " in name:
        raise ValueError(f"search space name {name!r} must be non-empty and contain no spaces")
    if name in _FACTORIES and not overwrite:
        raise ValueError(f"search space {name!r} is already registered (pass overwrite=True to replace)")
    _FACTORIES[name] = factory


def _plugins() -> dict[str, Callable[[], SearchSpace]]:
    return {ep.name: ep.load for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_spaces() -> list[str]:
    """Names of every space that :func:`get_space` can build, sorted."""
    return sorted(set(_FACTORIES) | set(_plugins()))


def get_space(name: str) -> SearchSpace:
    """A fresh instance of the space called ``name``."""
    if name in _FACTORIES:
        return _FACTORIES[name]()
    plugin = _plugins().get(name)
    if plugin is not None:
        space = plugin()()
        if not isinstance(space, SearchSpace):
            raise TypeError(f"plug-in {name!r} did not produce a SearchSpace but {type(space).__name__}")
        return space
    names = available_spaces()
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UnknownSpaceError(f"unknown search space {name!r}{hint}. Available: {', '.join(names)}")
