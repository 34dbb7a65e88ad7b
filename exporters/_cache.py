"""A small bounded cache for what the exporters compute once per content (function bodies, texts)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class BoundedCache(OrderedDict):
    """A dict that forgets its least recently used entry beyond ``size`` entries (each step O(1))."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        if len(self) > self.size:
            self.popitem(last=False)
