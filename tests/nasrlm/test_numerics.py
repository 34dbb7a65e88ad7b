"""kernel_independent: values that differ only in the last bits of a float64 become one number."""

from __future__ import annotations

import numpy as np

from nasrlm.numerics import kernel_independent


def test_values_a_last_bit_apart_become_the_same_number() -> None:
    values = np.array([1.2432931987041531, -3.4558073597300707, 0.6605083691196543, 1e-30, 12345.678])
    nudged = np.nextafter(values, np.inf)  # what another processor's kernels might have computed
    assert not np.array_equal(values, nudged)
    np.testing.assert_array_equal(kernel_independent(values), kernel_independent(nudged))


def test_the_result_is_float64_within_float32_precision_and_keeps_nan_and_infinity() -> None:
    values = np.array([[np.pi, np.nan], [-np.inf, 2.0 / 3.0]])
    rounded = kernel_independent(values)
    assert rounded.dtype == np.float64 and rounded.shape == values.shape
    np.testing.assert_allclose(rounded, values, rtol=2**-24)
    assert np.isnan(rounded[0, 1]) and rounded[1, 0] == -np.inf
    assert float(kernel_independent(0.1)) == float(np.float32(0.1))
