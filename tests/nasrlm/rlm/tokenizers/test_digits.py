"""The digit format the decoder writes: a value in [0, 10) as a fixed number of digits, coarse to fine."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nasrlm.rlm.model import RLMConfig
from nasrlm.rlm.normalize import HIGH, LOW
from nasrlm.rlm.tokenizers import DigitTokenizer

TOK = DigitTokenizer()
DIGITS = st.integers(1, 15)


def nearest(tok: DigitTokenizer, value: float) -> int:
    """The reference: the count of ``10**(1 - digits)`` nearest the float's exact value, ties to even."""
    return min(round(Fraction(value) * 10 ** (tok.digits - 1)), 10**tok.digits - 1)


def digits_of(q: int, tok: DigitTokenizer) -> list[int]:
    return [int(c) for c in str(q).zfill(tok.digits)]


def test_a_number_is_its_digits_units_first() -> None:
    assert TOK.vocab == tuple(f"<{d}>" for d in range(10)) and TOK.vocab_size == 10 and TOK.length == 4
    assert TOK.encode_many([5.678, 0.5, 9.999]).tolist() == [[5, 6, 7, 8], [0, 5, 0, 0], [9, 9, 9, 9]]
    assert DigitTokenizer(2).encode_many([3.14159]).tolist() == [[3, 1]]


def test_the_models_default_is_four_digits_and_covers_the_normalised_range() -> None:
    config = RLMConfig(text_vocab_size=10, text_pad_id=0, objectives=("a",))
    assert DigitTokenizer.from_dict(config.number) == TOK
    assert TOK.quantize_many([LOW, HIGH]).tolist() == [LOW, HIGH]  # neither end is clamped


@given(DIGITS, st.data())
def test_every_digit_sequence_is_a_number_that_encodes_back_to_it(digits: int, data) -> None:
    tok = DigitTokenizer(digits)
    ids = data.draw(st.lists(st.integers(0, 9), min_size=digits, max_size=digits))
    value = tok.decode_many(np.array(ids))
    assert value == float(Fraction(int("".join(map(str, ids))), 10 ** (digits - 1)))  # correctly rounded
    assert 0 <= value < 10
    assert tok.encode_many([value])[0].tolist() == ids


@given(DIGITS, st.floats(0, 12))
def test_encoding_rounds_the_exact_value_to_the_nearest_number(digits: int, value: float) -> None:
    tok = DigitTokenizer(digits)
    assert tok.encode_many([value])[0].tolist() == digits_of(nearest(tok, value), tok)
    if value <= 9.5:
        error = abs(tok.quantize_many([value])[0] - value)
        assert error <= 0.5 * 10.0 ** (1 - digits) + np.spacing(10.0)  # half a step, and decoding rounds


def test_near_ties_are_decided_on_the_exact_value() -> None:
    """Floats beside a decimal midpoint whose product with 1000 rounds onto the midpoint itself."""
    mids = (np.arange(10_000) + 0.5) / 1000
    values = np.concatenate([mids, np.nextafter(mids, 0), np.nextafter(mids, 10), np.arange(1, 160) / 16])
    expected = np.array([nearest(TOK, float(v)) for v in values])
    assert (np.rint(values * 1000) != expected).sum() > 1000  # so this test does test the exact path
    np.testing.assert_array_equal(TOK.encode_many(values), [digits_of(q, TOK) for q in expected])
    assert TOK.quantize_many([1.0665, 1.0675, 1.0625, 1.0005]).tolist() == [1.067, 1.067, 1.062, 1.0]


@given(st.lists(st.floats(0, 1e6), min_size=2, max_size=50))
def test_rounding_is_monotone(values: list[float]) -> None:
    values = np.sort(values)
    assert (np.diff(TOK.quantize_many(values)) >= 0).all()


def test_values_above_the_largest_number_become_it_and_small_ones_keep_a_leading_zero() -> None:
    above = [9.9995, 9.99951, 10.0, 123.4, 1e300, np.inf]
    assert (TOK.encode_many(above) == 9).all()
    assert TOK.quantize_many([9.99949, 0.5, 0.0123, 0.0005, 0.00049, 0.0, -0.0]).tolist() == \
        [9.999, 0.5, 0.012, 0.001, 0.0, 0.0, 0.0]
    assert not np.signbit(TOK.quantize_many([-0.0])).any()


@pytest.mark.parametrize("bad", [[np.nan], [1.0, np.nan], [-1.0], [2.0, -1e-300], [-np.inf]])
def test_nan_and_negative_values_are_refused(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="NaN|negative"):
        TOK.encode_many(bad)


def test_shapes_are_kept() -> None:
    values = np.random.default_rng(0).uniform(0, 10, (3, 5))
    ids = TOK.encode_many(values)
    assert ids.shape == (3, 5, 4) and ids.dtype == np.int64 and TOK.encode_many(2.5).tolist() == [2, 5, 0, 0]
    np.testing.assert_array_equal(TOK.decode_many(ids), TOK.quantize_many(values.ravel()).reshape(3, 5))


@pytest.mark.parametrize("ids", [[1, 2, 3], [1, 2, 3, 4, 5], [1, 2, 3, 10], [-1, 0, 0, 0], [1.0, 2, 3, 4], 5])
def test_decoding_refuses_anything_but_whole_numbers_of_digits(ids: list) -> None:
    with pytest.raises(ValueError):
        TOK.decode_many(np.array(ids))


@given(DIGITS, st.data())
def test_every_digit_may_follow_any_prefix_until_the_number_is_written(digits: int, data) -> None:
    tok = DigitTokenizer(digits)
    prefix = data.draw(st.lists(st.integers(0, 9), max_size=digits - 1))
    assert tok.possible_next_tokens(prefix) == list(range(10))
    with pytest.raises(ValueError):
        tok.possible_next_tokens([*prefix, 0, *[0] * (digits - 1 - len(prefix))])  # complete
    with pytest.raises(ValueError):
        tok.possible_next_tokens([*prefix[:-1], 10])


def test_the_format_survives_json_and_refuses_what_it_is_not() -> None:
    for tok in (TOK, DigitTokenizer(7)):
        assert DigitTokenizer.from_dict(json.loads(json.dumps(tok.to_dict()))) == tok
    for d in ({"type": "NumberTokenizer", "digits": 4}, {"type": "DigitTokenizer"},
              {"type": "DigitTokenizer", "digits": 4, "signed": False}):
        with pytest.raises(ValueError, match="not a DigitTokenizer"):
            DigitTokenizer.from_dict(d)
    for digits in (0, 16, 2.5, True, "4"):
        with pytest.raises(ValueError, match="digits must be"):
            DigitTokenizer(digits)
    assert hash(DigitTokenizer(3)) == hash(DigitTokenizer(3)) != hash(TOK)
