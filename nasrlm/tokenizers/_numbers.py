"""Fixed-length decimal number tokenizer for constrained digit-by-digit decoding.

The regression language model predicts a metric (accuracy, latency, ...) by emitting the tokens of a
number one at a time, in the spirit of regress-lm's decoder tokenizers, but without any framework
dependency (pure ``numpy``/stdlib).

Representation
--------------
Every number is written as exactly ``length = 2 + mantissa_digits`` tokens, coarse to fine::

    <sign> <E{e}> <d1> <d2> ... <dM>        value = sign * d1.d2...dM * 10**e

i.e. ordinary scientific notation with ``M = mantissa_digits`` significant digits: the first digit is
the units digit of the mantissa (``d1.d2d3d4``, not ``0.d1d2d3d4``).  Examples with ``M = 4``::

    93.66   -> <+> <E1>  <9> <3> <6> <6>
    -0.003  -> <-> <E-3> <3> <0> <0> <0>
    0.0     -> <+> <E-8> <0> <0> <0> <0>      (min_exponent = -8)

Why this layout:

* **Coarse to fine.**  The decoder commits to the sign and the order of magnitude first and then refines
  digits, so early tokens carry most of the value and a sampling error late in the sequence costs at most
  one unit in the last place.  The exponent is a *single* token (``<E-2>``, ``<E0>``, ``<E3>``) rather
  than a multi-digit exponent, so the magnitude is one categorical decision, not a string whose meaning
  depends on its own length.
* **Fixed length, purely positional constraint.**  Position 0 admits only sign tokens, position 1 only
  exponent tokens and positions ``2..length-1`` only digit tokens.  The set of allowed tokens depends on
  the position alone, never on earlier tokens, so the whole grammar is one boolean matrix
  (:meth:`NumberTokenizer.position_mask`, shape ``(length, vocab_size)``).  Batched constrained sampling
  is then ``logits[:, k].masked_fill(~mask[k], -inf)`` at step ``k``, with no per-sample state, and the
  decoder always stops after exactly ``length`` steps (no end-of-number token to miss).
* **Forced positions cost nothing.**  With ``signed=False`` position 0 admits only ``<+>``, and with
  ``min_exponent == max_exponent`` position 1 admits one exponent: a position with a single allowed
  token is filled in without asking the model (a decoder step saved), which suits labels already
  normalised into one decade, as the regression model's are.
* **Every constrained sample is a valid finite number.**  :meth:`~NumberTokenizer.decode` accepts *any*
  sequence allowed by the mask, including non-canonical ones: a leading zero digit (a "denormal", e.g.
  ``<+> <E3> <0> <1> <2> <3>`` = 0.123e3 = 123.0) and negative zero (``<-> ... <0> <0> <0> <0>`` =
  0.0).  The largest magnitude any sequence can decode to is ``9.99..9e{max_exponent}``, so the result
  is always finite.

Canonical encoding (what :meth:`~NumberTokenizer.encode` produces)
-------------------------------------------------------------------
* **Rounding** is to the nearest representable value, ties to even, applied to the *exact* binary value
  of the float (so ``1.0005``, whose binary value is ``1.000499999...``, rounds down to ``1.000``, while
  the exact binary tie ``1.0625`` rounds to the even ``1.062``).  Carries propagate into the exponent:
  ``9.99995 -> 1.000e+01``.  Rounding is monotone, hence :meth:`~NumberTokenizer.quantize` preserves the
  (non-strict) ordering of values.
* **Normal numbers** have a non-zero first digit.  The relative rounding error is at most
  ``0.5 * 10**(1 - M)`` (5e-4 for the default ``M = 4``).
* **Below the smallest normal** ``1.0e{min_exponent}`` there is *gradual underflow*: the exponent is pinned
  at ``min_exponent`` and the value is rounded to the fixed absolute grid ``10**(min_exponent - M + 1)``
  with leading zero digits (a denormal).  Magnitudes below half the smallest denormal round to zero.
  This keeps the absolute error bounded by ``0.5 * 10**(min_exponent - M + 1)`` and keeps rounding
  monotone through zero.
* **Zero** (including ``-0.0`` and anything that rounds to zero) is ``<+> <E{min_exponent}> <0>...<0>``.
* **Overflow** clamps: any magnitude that would round above the largest representable value
  ``9.99..9e{max_exponent}`` (including ``+-inf``) becomes that largest value with the original sign.
* **NaN** raises ``ValueError``.

Default precision
-----------------
``mantissa_digits = 4`` gives a relative resolution of 1e-3 at worst (one unit in the 4th significant
digit): an accuracy of ``90.00`` is resolved to 0.01 percentage points, a latency of ``12.34`` ms to
10 us.  Published NAS benchmark tables report accuracies with two decimals and their seed-to-seed noise
is of order 0.1 pp, so finer digits would only spend decoding steps (and training signal) on noise.
The default exponent range ``[-8, 8]`` covers accuracies in [0, 1] or [0, 100], latencies in ms or s,
parameter counts in millions and FLOPs in MFLOPs; raw FLOP counts (~1e9 and above) must be rescaled or
need a larger ``max_exponent`` (otherwise they clamp).

Vocabulary
----------
``vocab`` has the fixed order: ``"<+>", "<->"``, then ``"<E{e}>"`` for ``e = min_exponent..max_exponent``
ascending, then ``"<0>".."<9>"``.  Ids are indices into this tuple, in ``[0, vocab_size)``; the lead
model is expected to offset them into its own joint vocabulary if it has one.
"""

from __future__ import annotations

import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

__all__ = ["NumberTokenizer"]

# Bounds on the configuration: mantissas must be exact in float64/int64 and every representable value
# (including the smallest denormal 10**(min_exponent - M + 1)) must be a normal-ish, finite float64.
_MAX_MANTISSA_DIGITS = 15
_MAX_ABS_EXPONENT = 280

# Decimal context for the exact scalar path: float64 values have at most ~770 significant decimal digits.
_EXACT = decimal.Context(prec=1200, rounding=decimal.ROUND_HALF_EVEN, Emin=-10_000, Emax=10_000)


def _pow10(k: np.ndarray | int) -> np.ndarray | float:
    """10.0 ** k as float64 (exact for |k| <= 22)."""
    return np.power(10.0, np.asarray(k, dtype=np.float64))


@dataclass(frozen=True)
class NumberTokenizer:
    """Sign / exponent / mantissa-digit tokenizer with a purely positional grammar (see module doc)."""

    mantissa_digits: int = 4
    min_exponent: int = -8
    max_exponent: int = 8
    signed: bool = True  # False: only ``<+>`` is allowed and negative values cannot be encoded

    def __post_init__(self) -> None:
        for name in ("mantissa_digits", "min_exponent", "max_exponent"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name} must be an int, got {value!r}")
            object.__setattr__(self, name, int(value))
        if not isinstance(self.signed, (bool, np.bool_)):
            raise TypeError(f"signed must be a bool, got {self.signed!r}")
        object.__setattr__(self, "signed", bool(self.signed))
        if not 1 <= self.mantissa_digits <= _MAX_MANTISSA_DIGITS:
            raise ValueError(
                f"mantissa_digits must be in [1, {_MAX_MANTISSA_DIGITS}], got {self.mantissa_digits}"
            )
        if self.min_exponent > self.max_exponent:
            raise ValueError(f"min_exponent ({self.min_exponent}) > max_exponent ({self.max_exponent})")
        if max(abs(self.min_exponent), abs(self.max_exponent)) > _MAX_ABS_EXPONENT:
            raise ValueError(f"exponents must lie in [-{_MAX_ABS_EXPONENT}, {_MAX_ABS_EXPONENT}]")

    # ------------------------------------------------------------------ vocabulary / grammar

    @property
    def num_exponents(self) -> int:
        return self.max_exponent - self.min_exponent + 1

    @property
    def exponent_offset(self) -> int:
        """Id of ``<E{min_exponent}>``; exponent ``e`` has id ``exponent_offset + e - min_exponent``."""
        return 2

    @property
    def digit_offset(self) -> int:
        """Id of ``<0>``; digit ``d`` has id ``digit_offset + d``."""
        return 2 + self.num_exponents

    @cached_property
    def vocab(self) -> tuple[str, ...]:
        exps = tuple(f"<E{e}>" for e in range(self.min_exponent, self.max_exponent + 1))
        return ("<+>", "<->", *exps, *(f"<{d}>" for d in range(10)))

    @property
    def vocab_size(self) -> int:
        return 2 + self.num_exponents + 10

    @property
    def length(self) -> int:
        """Tokens per number: sign, exponent, ``mantissa_digits`` digits."""
        return 2 + self.mantissa_digits

    @cached_property
    def _token_to_id(self) -> dict[str, int]:
        return {tok: i for i, tok in enumerate(self.vocab)}

    def token_to_id(self, token: str) -> int:
        return self._token_to_id[token]

    def id_to_token(self, token_id: int) -> str:
        return self.vocab[token_id]

    @cached_property
    def _mask(self) -> np.ndarray:
        mask = np.zeros((self.length, self.vocab_size), dtype=bool)
        mask[0, 0 : 2 if self.signed else 1] = True
        mask[1, self.exponent_offset : self.digit_offset] = True
        mask[2:, self.digit_offset :] = True
        mask.setflags(write=False)
        return mask

    def position_mask(self) -> np.ndarray:
        """Bool ``(length, vocab_size)``: ``mask[k, t]`` iff token ``t`` is allowed at position ``k``.

        A fresh writable copy; the grammar is positional, so row ``k`` equals
        ``possible_next_tokens(prefix)`` for every valid prefix of length ``k``.
        """
        return self._mask.copy()

    def possible_next_tokens(self, prefix: Sequence[int]) -> list[int]:
        """Ids allowed after ``prefix``; ``ValueError`` if the prefix is invalid or already complete."""
        ids = [int(t) for t in prefix]
        if len(ids) >= self.length:
            raise ValueError(
                f"prefix of length {len(ids)} is already a complete number (length {self.length})"
            )
        self._check_ids(ids)
        return np.flatnonzero(self._mask[len(ids)]).tolist()

    def _check_ids(self, ids: Sequence[int]) -> None:
        for k, t in enumerate(ids):
            if not (0 <= t < self.vocab_size and self._mask[k, t]):
                tok = self.vocab[t] if 0 <= t < self.vocab_size else "<out of vocab>"
                raise ValueError(f"token id {t} ({tok}) is not allowed at position {k}")

    # ------------------------------------------------------------------ representable range

    @property
    def largest(self) -> float:
        """Largest representable magnitude, ``9.99..9e{max_exponent}``."""
        return self._value(10**self.mantissa_digits - 1, self.max_exponent)

    @property
    def smallest_normal(self) -> float:
        """Smallest magnitude with a non-zero leading digit, ``1e{min_exponent}``."""
        return self._value(10 ** (self.mantissa_digits - 1), self.min_exponent)

    @property
    def smallest_positive(self) -> float:
        """Smallest non-zero magnitude (a denormal), ``10**(min_exponent - mantissa_digits + 1)``."""
        return self._value(1, self.min_exponent)

    def _value(self, q: int, e: int) -> float:
        """Integer mantissa ``q`` (``M`` digits) at exponent ``e`` -> float; as in decode_many."""
        k = e - self.mantissa_digits + 1
        return float(q) * float(_pow10(k)) if k >= 0 else float(q) / float(_pow10(-k))

    # ------------------------------------------------------------------ scalar encode / decode

    def _encode_exact(self, value: float) -> tuple[int, int, int]:
        """(negative, integer mantissa q in [0, 10**M), exponent e) with exact decimal rounding."""
        value = float(value)
        if value != value:
            raise ValueError("cannot encode NaN")
        m, lo, hi = self.mantissa_digits, self.min_exponent, self.max_exponent
        negative = value < 0
        if negative and not self.signed:
            raise ValueError(f"cannot encode the negative value {value} in an unsigned format")
        if value in (float("inf"), float("-inf")):
            return negative, 10**m - 1, hi
        d = abs(decimal.Decimal(value))  # exact binary value
        if d == 0:
            return False, 0, lo
        e = max(d.adjusted(), lo)  # adjusted() = floor(log10(d)), exact
        if e > hi + 1:
            return negative, 10**m - 1, hi
        q = int(d.scaleb(m - 1 - e, _EXACT).to_integral_value(decimal.ROUND_HALF_EVEN, _EXACT))
        if q >= 10**m:  # carry, e.g. 9.99995 -> 10.000 -> 1.000e+1
            q //= 10
            e += 1
        if e > hi:
            return negative, 10**m - 1, hi
        if q == 0:
            return False, 0, lo
        return negative, q, e

    def _ids_from_parts(self, negative: int, q: int, e: int) -> list[int]:
        digits = str(q).zfill(self.mantissa_digits)
        return [
            int(negative),
            self.exponent_offset + e - self.min_exponent,
            *(self.digit_offset + int(c) for c in digits),
        ]

    def encode(self, value: float) -> list[int]:
        """Canonical ids (``length`` of them) of the representable value nearest ``value``."""
        return self._ids_from_parts(*self._encode_exact(value))

    def decode(self, ids: Sequence[int]) -> float:
        """Value of any sequence allowed by :meth:`position_mask` (non-canonical ones included)."""
        ids = [int(t) for t in ids]
        if len(ids) != self.length:
            raise ValueError(f"expected {self.length} ids, got {len(ids)}")
        self._check_ids(ids)
        e = ids[1] - self.exponent_offset + self.min_exponent
        q = int("".join(str(t - self.digit_offset) for t in ids[2:]))
        magnitude = self._value(q, e)
        return (-magnitude if ids[0] == 1 else magnitude) + 0.0  # + 0.0 turns "-0" into 0.0

    def quantize(self, value: float) -> float:
        """``decode(encode(value))``: the nearest representable value (ties to even, clamped)."""
        negative, q, e = self._encode_exact(value)
        magnitude = self._value(q, e)
        return -magnitude if negative else magnitude

    def tokens(self, value: float) -> list[str]:
        """Human-readable tokens of ``encode(value)``."""
        return [self.vocab[t] for t in self.encode(value)]

    # ------------------------------------------------------------------ vectorised encode / decode

    def encode_many(self, values: np.ndarray | Sequence[float]) -> np.ndarray:
        """Vectorised :meth:`encode`: ``(n,)`` floats -> int64 ``(n, length)``; identical ids to ``encode``.

        The fast path computes the scaled mantissa in float64; the rare values whose scaled mantissa lies
        within float error of a rounding tie (and any configuration where float64 cannot decide) are
        re-encoded with the exact scalar path, so the output always matches :meth:`encode`.
        """
        x = np.asarray(values, dtype=np.float64)
        if x.ndim != 1:
            raise ValueError(f"encode_many expects a 1-d array, got shape {x.shape}")
        if np.isnan(x).any():
            raise ValueError("cannot encode NaN")
        if not self.signed and (x < 0).any():
            raise ValueError(f"cannot encode negative values in an unsigned format (e.g. {x[x < 0][0]})")
        m, lo, hi = self.mantissa_digits, self.min_exponent, self.max_exponent
        n = x.shape[0]
        a = np.abs(x)
        negative = x < 0
        top = 10**m  # int, exact

        over = a >= 10.0 ** (hi + 1)  # certainly clamps (covers inf)
        a = np.where(over, 0.0, a)  # handled by the clamp below; keeps the arithmetic finite
        with np.errstate(divide="ignore"):
            e = np.floor(np.log10(np.where(a > 0, a, 1.0))).astype(np.int64)
        e = np.clip(e, lo, hi + 1)

        def scaled_of(e: np.ndarray) -> np.ndarray:
            k = (m - 1) - e  # scaled = a * 10**k, using an exact power when |k| <= 22
            with np.errstate(over="ignore"):
                return np.where(k >= 0, a * _pow10(np.maximum(k, 0)), a / _pow10(np.maximum(-k, 0)))

        s = scaled_of(e)
        # log10 can be off by one next to powers of ten; renormalise so that 10**(m-1) <= s < 10**m
        # (or e == lo for denormals).  Either side of an exact power of ten rounds to the same result.
        up = s >= top
        down = (s < top // 10) & (e > lo)
        if up.any() or down.any():
            e = e + up - down
            s = scaled_of(e)
        q_float = np.rint(s)  # ties to even
        frac = np.abs(s - np.floor(s) - 0.5)
        # |error of s| <= ~2 ulp(s) (<= 1 rounding in the power, 1 in the product); be generous.
        tol = max(float(top) * 2.0**-44, 1e-9)
        ambiguous = (frac < tol) & (a > 0)
        if max(abs(m - 1 - lo), abs(m - 2 - hi)) > 22:
            ambiguous |= a > 0  # inexact powers of ten: let the exact path decide
        q = q_float.astype(np.int64)
        carry = q >= top
        q = np.where(carry, q // 10, q)
        e = e + carry
        clamp = over | (e > hi)
        q = np.where(clamp, top - 1, q)
        e = np.where(clamp, hi, e)
        zero = q == 0
        e = np.where(zero, lo, e)
        negative = negative & ~zero

        out = np.empty((n, self.length), dtype=np.int64)
        out[:, 0] = negative
        out[:, 1] = self.exponent_offset + e - lo
        place = 10 ** np.arange(m - 1, -1, -1, dtype=np.int64)
        out[:, 2:] = self.digit_offset + (q[:, None] // place) % 10
        for i in np.flatnonzero(ambiguous):
            out[i] = self._ids_from_parts(*self._encode_exact(float(x[i])))
        return out

    def decode_many(self, ids: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """Vectorised :meth:`decode`: int ``(..., length)`` -> float64 ``(...)``."""
        ids = np.asarray(ids)
        if ids.ndim < 1 or ids.shape[-1] != self.length:
            raise ValueError(f"expected ids of shape (..., {self.length}), got {ids.shape}")
        if not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"ids must be integers, got dtype {ids.dtype}")
        ids = ids.astype(np.int64, copy=False)
        in_range = (ids >= 0) & (ids < self.vocab_size)
        allowed = in_range & self._mask[np.arange(self.length), np.where(in_range, ids, 0)]
        if not allowed.all():
            bad = np.argwhere(~allowed)[0]
            raise ValueError(f"token id {ids[tuple(bad)]} is not allowed at position {bad[-1]} (index {bad})")
        m = self.mantissa_digits
        place = 10 ** np.arange(m - 1, -1, -1, dtype=np.int64)
        q = ((ids[..., 2:] - self.digit_offset) * place).sum(axis=-1).astype(np.float64)
        k = ids[..., 1] - self.exponent_offset + self.min_exponent - (m - 1)
        magnitude = np.where(k >= 0, q * _pow10(np.maximum(k, 0)), q / _pow10(np.maximum(-k, 0)))
        return np.where(ids[..., 0] == 1, -magnitude, magnitude) + 0.0

    def quantize_many(self, values: np.ndarray | Sequence[float]) -> np.ndarray:
        return self.decode_many(self.encode_many(values))

    # ------------------------------------------------------------------ serialisation

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "NumberTokenizer",
            "mantissa_digits": self.mantissa_digits,
            "min_exponent": self.min_exponent,
            "max_exponent": self.max_exponent,
            "signed": self.signed,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NumberTokenizer:
        kind = d.get("type", "NumberTokenizer")
        if kind != "NumberTokenizer":
            raise ValueError(f"not a NumberTokenizer config: type={kind!r}")
        unknown = set(d) - {"type", "mantissa_digits", "min_exponent", "max_exponent", "signed"}
        if unknown:
            raise ValueError(f"unknown NumberTokenizer config keys: {sorted(unknown)}")
        return cls(
            mantissa_digits=d["mantissa_digits"],
            min_exponent=d["min_exponent"],
            max_exponent=d["max_exponent"],
            signed=d["signed"],
        )
