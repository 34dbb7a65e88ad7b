"""Numbers that are the same on every processor: what a seeded search decides on must not depend on the BLAS
kernels or SIMD paths of the machine it runs on.

numpy and scipy compute matrix products, least squares and decompositions through OpenBLAS, which picks its
kernels by the processor (``OPENBLAS_CORETYPE`` overrides it), and some of numpy's elementwise functions
(``log``, ``exp``) take processor-specific SIMD paths. Their results then differ in the last bits from one
machine to the next. Harmless alone, such a difference grows: a prior's line that differs in its 16th digit
gives a forest other near-tied splits, the search scores its candidates differently, and from then on every
trial differs (experiments/README.md, "Same seed, same search"). So every value a seeded search computes that
way, and carries on into its model or its decisions, is first rounded here, to float32's precision: some
seven digits, far above that noise and far below anything a prediction or a ranking can tell apart. (A value
within the noise of a rounding boundary can still round apart: about one in a billion for a last-bit
difference, so a rare search in many; results that differ by more, as an ill-conditioned solve's may, part
more often.) Where the decision itself can be made without BLAS, it is: :mod:`nasrlm.metrics` sums its
hypervolumes with numpy's pairwise sums, which add in one order on every processor.
"""

from __future__ import annotations

import numpy as np


def kernel_independent(values: np.ndarray | float) -> np.ndarray:
    """``values`` rounded to float32's precision (24 significant bits, ties to even), returned as float64
    with float64's range (NaN and infinities kept): the same number whichever kernels computed it (module
    docstring). Exact arithmetic on the mantissa, so the rounding itself is the same on every processor."""
    mantissa, exponent = np.frexp(np.asarray(values, dtype=np.float64))
    return np.ldexp(np.round(mantissa * 2.0**24) / 2.0**24, exponent)


def kernel_independent_vector(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to float32's precision of the largest of them (one grid, a power of two, for all):
    a component that is noise beside the largest, as a least-squares coefficient on a direction the rows do
    not span (0 on one processor, 3e-14 on another), is 0 on every processor, where :func:`kernel_independent`
    would keep that noise's own seven digits."""
    values = np.asarray(values, dtype=np.float64)
    largest = float(np.abs(values).max(initial=0.0))
    if largest == 0.0 or not np.isfinite(largest):
        return values.copy()
    quantum = 2.0 ** (np.frexp(largest)[1] - 24)  # exact: a power of two
    return np.round(values / quantum) * quantum
