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
within the noise of a rounding boundary, about one in a billion, can still round apart.)
"""

from __future__ import annotations

import numpy as np


def kernel_independent(values: np.ndarray | float) -> np.ndarray:
    """``values`` rounded to float32's precision, returned as float64 (NaN and infinities kept): the same
    number whichever kernels computed it (module docstring)."""
    return np.asarray(values, dtype=np.float64).astype(np.float32).astype(np.float64)
