"""kernel_independent(_vector): values that differ only in the last bits of a float64 become one number."""

from __future__ import annotations

import numpy as np

from nasrlm.numerics import kernel_independent, kernel_independent_vector


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


def test_a_vector_s_noise_beside_its_largest_component_is_zero_on_every_processor() -> None:
    coef = np.array([1.258, 0.515, 2.5546224003921737e-14, -0.41])  # a direction the rows did not span
    other = np.array([np.nextafter(1.258, 0), 0.515, 0.0, -0.41])  # another processor's kernels
    np.testing.assert_array_equal(kernel_independent_vector(coef), kernel_independent_vector(other))
    assert kernel_independent_vector(coef)[2] == 0.0
    np.testing.assert_allclose(kernel_independent_vector(coef), coef, atol=2**-23)
    np.testing.assert_array_equal(kernel_independent_vector(np.zeros(3)), np.zeros(3))
