"""The number format the decoder writes: a value in [0, 10) as ``digits`` decimal digits, coarse to fine.

Labels are normalised into [1, 10) before they are encoded (:mod:`nasrlm.rlm.normalize`), so one decade is
all the decoder ever writes, and a number is its digits alone: with ``digits=4``, ``d1.d2d3d4`` is
written ``<d1> <d2> <d3> <d4>`` (``5.678`` -> ``<5> <6> <7> <8>``). No sign or exponent token: in one
decade they would be the same for every label. Every position admits every digit, so any sequence of
``length`` digit tokens is a valid number (the decoder needs no mask), and a leading ``<0>`` decodes to
a value below 1, which the normaliser's inverse clamps. Coarse to fine: the first digit is the coarse
rank of a normalised label, the next ones refine it, so a late sampling error costs little. Four
digits (the default) resolve 1/9,000 of the normalised range, finer than any benchmark's rank noise.

Encoding rounds the float's exact binary value to the nearest multiple of ``10**(1 - digits)``, ties
to even; rounding is monotone, so :meth:`DigitTokenizer.quantize_many` keeps the order of values.
Values above the largest number, ``9.99..9`` (``+inf`` included), become it; negative values and NaN
raise ``ValueError`` (a normalised label is never either). Token ids are the digits themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["DigitTokenizer"]


@dataclass(frozen=True)
class DigitTokenizer:
    """``digits`` decimal digits of a value in [0, 10), the units digit first (see the module doc)."""

    digits: int = 4

    def __post_init__(self) -> None:
        # at most 15 digits: the scaled values and their rounding ties stay exact in float64
        if isinstance(self.digits, bool) or not isinstance(self.digits, int) or not 1 <= self.digits <= 15:
            raise ValueError(f"digits must be a whole number in [1, 15], got {self.digits!r}")

    vocab = tuple(f"<{d}>" for d in range(10))  # id d is the digit d
    vocab_size = len(vocab)

    @property
    def length(self) -> int:
        """Tokens per number."""
        return self.digits

    @property
    def _scale(self) -> int:
        return 10 ** (self.digits - 1)  # a number is an integer count of 1 / _scale

    def possible_next_tokens(self, prefix: Sequence[int]) -> list[int]:
        """Ids allowed after ``prefix``: every digit, until a whole number has been written."""
        if len(prefix) >= self.length or any(not 0 <= t < self.vocab_size for t in prefix):
            raise ValueError(f"{list(prefix)} is not the start of a number of {self.length} digits")
        return list(range(self.vocab_size))

    def encode_many(self, values: np.ndarray | Sequence[float]) -> np.ndarray:
        """Floats of shape ``(...)`` -> int64 ids of shape ``(..., length)``."""
        x = np.asarray(values, dtype=np.float64)
        if np.isnan(x).any():
            raise ValueError("cannot encode NaN")
        if (x < 0).any():
            raise ValueError(f"cannot encode the negative value {x[x < 0].flat[0]}: numbers are in [0, 10)")
        top = 10**self.digits - 1
        scaled = np.minimum(np.minimum(x, 10.0) * self._scale, top)  # one rounding: the power is exact
        q = np.array(np.rint(scaled), dtype=np.int64)  # ties to even
        # a product that rounded onto a tie may come from a value just beside it: decide exactly
        for i in np.flatnonzero(scaled - np.floor(scaled) == 0.5):
            q.flat[i] = round(Fraction(float(x.flat[i])) * self._scale)
        place = 10 ** np.arange(self.digits - 1, -1, -1, dtype=np.int64)
        return (q[..., None] // place) % 10

    def decode_many(self, ids: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """Ids of shape ``(..., length)`` -> float64 values of shape ``(...)``."""
        ids = np.asarray(ids)
        if ids.ndim < 1 or ids.shape[-1] != self.length or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"expected integer ids of shape (..., {self.length}), got {ids.dtype} "
                             f"{ids.shape}")
        bad = (ids < 0) | (ids >= self.vocab_size)
        if bad.any():
            raise ValueError(f"ids must be digits in [0, {self.vocab_size}), got {ids[bad][0]}")
        place = 10 ** np.arange(self.digits - 1, -1, -1, dtype=np.int64)
        return (ids.astype(np.int64) * place).sum(axis=-1) / float(self._scale)

    def quantize_many(self, values: np.ndarray | Sequence[float]) -> np.ndarray:
        """The numbers ``values`` are encoded as (rounded, clamped)."""
        return self.decode_many(self.encode_many(values))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "DigitTokenizer", "digits": self.digits}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DigitTokenizer:
        if d.get("type") != "DigitTokenizer" or set(d) != {"type", "digits"}:
            raise ValueError(f"not a DigitTokenizer config: {dict(d)}")
        return cls(d["digits"])
