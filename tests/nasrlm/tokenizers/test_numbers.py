"""Tests for the fixed-length sign/exponent/mantissa number tokenizer."""

from __future__ import annotations

import json
import math
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nasrlm.tokenizers._numbers import NumberTokenizer

TOK = NumberTokenizer()
ALL_DIGITS = [1, 2, 3, 4, 5, 6]


def ids_of(tok: NumberTokenizer, sign: str, exponent: int, digits: str) -> list[int]:
    return [tok.token_to_id(t) for t in [f"<{sign}>", f"<E{exponent}>", *(f"<{d}>" for d in digits)]]


def random_valid_sequences(tok: NumberTokenizer, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` sequences drawn uniformly from the allowed tokens of ``position_mask`` at each position."""
    mask = tok.position_mask()
    cols = []
    for k in range(tok.length):
        allowed = np.flatnonzero(mask[k])
        cols.append(rng.choice(allowed, size=n))
    return np.stack(cols, axis=1)


def log_uniform(rng: np.random.Generator, n: int, lo: float, hi: float) -> np.ndarray:
    return rng.choice([-1.0, 1.0], size=n) * 10.0 ** rng.uniform(lo, hi, size=n)


# --------------------------------------------------------------------------- vocabulary and grammar


@pytest.mark.parametrize("m", ALL_DIGITS)
def test_vocab_layout(m: int) -> None:
    tok = NumberTokenizer(mantissa_digits=m, min_exponent=-3, max_exponent=2)
    assert tok.length == 2 + m
    assert tok.vocab == (
        "<+>", "<->", "<E-3>", "<E-2>", "<E-1>", "<E0>", "<E1>", "<E2>",
        "<0>", "<1>", "<2>", "<3>", "<4>", "<5>", "<6>", "<7>", "<8>", "<9>",
    )  # fmt: skip
    assert tok.vocab_size == len(tok.vocab) == 18
    assert len(set(tok.vocab)) == len(tok.vocab)
    for i, t in enumerate(tok.vocab):
        assert tok.token_to_id(t) == i
        assert tok.id_to_token(i) == t


def test_default_vocab_has_no_duplicates_and_expected_size() -> None:
    assert len(set(TOK.vocab)) == len(TOK.vocab) == TOK.vocab_size == 2 + 17 + 10
    assert TOK.length == 6
    assert TOK.tokens(93.66) == ["<+>", "<E1>", "<9>", "<3>", "<6>", "<6>"]
    assert TOK.tokens(-0.003) == ["<->", "<E-3>", "<3>", "<0>", "<0>", "<0>"]


def test_position_mask_structure() -> None:
    mask = TOK.position_mask()
    assert mask.shape == (TOK.length, TOK.vocab_size) and mask.dtype == bool
    assert [TOK.vocab[i] for i in np.flatnonzero(mask[0])] == ["<+>", "<->"]
    assert [TOK.vocab[i] for i in np.flatnonzero(mask[1])] == [f"<E{e}>" for e in range(-8, 9)]
    for k in range(2, TOK.length):
        assert [TOK.vocab[i] for i in np.flatnonzero(mask[k])] == [f"<{d}>" for d in range(10)]
    # every token is allowed somewhere, positions partition the vocabulary
    assert (mask.sum(axis=0) >= 1).all()
    # callers get a copy: mutating it must not change the tokenizer
    mask[:] = False
    assert TOK.position_mask()[0, 0]


@pytest.mark.parametrize("m", ALL_DIGITS)
def test_position_mask_agrees_with_possible_next_tokens(m: int) -> None:
    tok = NumberTokenizer(mantissa_digits=m)
    mask = tok.position_mask()
    rng = np.random.default_rng(m)
    seqs = random_valid_sequences(tok, 200, rng)
    for seq in seqs:
        for k in range(tok.length):
            assert tok.possible_next_tokens(seq[:k].tolist()) == np.flatnonzero(mask[k]).tolist()
    # encoded values are valid prefixes at every length too
    for v in log_uniform(rng, 50, -10, 10):
        ids = tok.encode(float(v))
        for k in range(tok.length):
            assert tok.possible_next_tokens(ids[:k]) == np.flatnonzero(mask[k]).tolist()


def test_possible_next_tokens_rejects_invalid_or_complete_prefix() -> None:
    plus, e0, d5 = TOK.token_to_id("<+>"), TOK.token_to_id("<E0>"), TOK.token_to_id("<5>")
    with pytest.raises(ValueError):
        TOK.possible_next_tokens([e0])  # exponent at the sign position
    with pytest.raises(ValueError):
        TOK.possible_next_tokens([plus, d5])  # digit at the exponent position
    with pytest.raises(ValueError):
        TOK.possible_next_tokens([plus, e0, plus])  # sign at a digit position
    with pytest.raises(ValueError):
        TOK.possible_next_tokens([TOK.vocab_size])  # out of vocabulary
    with pytest.raises(ValueError):
        TOK.possible_next_tokens([-1])
    with pytest.raises(ValueError):
        TOK.possible_next_tokens(TOK.encode(1.5))  # complete
    assert TOK.possible_next_tokens([]) == [0, 1]


# --------------------------------------------------------------------------- encode / decode values


@pytest.mark.parametrize("value", [12.34, 93.66, 0.003, 1.0, 100.0, 9.999, 0.1234, 1234.0, 5e-8, 7.5e6])
def test_representable_values_round_trip_exactly(value: float) -> None:
    ids = TOK.encode(value)
    assert len(ids) == TOK.length and all(0 <= i < TOK.vocab_size for i in ids)
    assert TOK.decode(ids) == pytest.approx(value, rel=1e-12, abs=0)
    assert TOK.decode(ids) == value  # correctly rounded decode: bit-exact for these
    assert TOK.quantize(value) == value
    assert TOK.quantize(-value) == -value


@pytest.mark.parametrize("value", [93.66, 0.003, 17.2381, 0.912345, 3.14159265, 271828.18, 1.23456e-7])
def test_quantize_relative_error(value: float) -> None:
    assert TOK.quantize(value) == pytest.approx(value, rel=5e-4)
    assert TOK.quantize(17.2381) == 17.24


@pytest.mark.parametrize("m", ALL_DIGITS)
def test_random_representable_values_round_trip(m: int) -> None:
    tok = NumberTokenizer(mantissa_digits=m)
    rng = np.random.default_rng(100 + m)
    for _ in range(300):
        q = int(rng.integers(10 ** (m - 1), 10**m))
        e = int(rng.integers(tok.min_exponent, tok.max_exponent + 1))
        sign = "-" if rng.random() < 0.5 else "+"
        ids = ids_of(tok, sign, e, str(q))
        value = tok.decode(ids)
        expected = float(Decimal(f"{sign}{q}E{e - m + 1}"))  # correctly rounded decimal -> float
        assert value == expected
        assert tok.encode(value) == ids


def test_carries() -> None:
    assert TOK.tokens(9.99995) == ["<+>", "<E1>", "<1>", "<0>", "<0>", "<0>"]
    assert TOK.quantize(9.99995) == 10.0
    assert TOK.quantize(9.99949) == 9.999
    assert TOK.quantize(-99_996.0) == -100_000.0
    assert TOK.quantize(0.099996) == 0.1
    assert TOK.tokens(0.099996) == ["<+>", "<E-1>", "<1>", "<0>", "<0>", "<0>"]
    one = NumberTokenizer(mantissa_digits=1)
    assert one.tokens(9.5) == ["<+>", "<E1>", "<1>"]  # exact tie, ties-to-even gives 10
    assert one.quantize(8.5) == 8.0  # exact tie to even
    assert one.quantize(9.6) == 10.0
    # carry past the largest exponent clamps instead of overflowing
    assert TOK.quantize(9.99995e8) == TOK.largest == 9.999e8


def test_ties_to_even_on_exact_binary_value() -> None:
    assert TOK.quantize(1.0625) == 1.062  # exact binary tie -> even digit
    assert TOK.quantize(1.0665) == 1.067  # binary value 1.06650000000000000355 > tie: up (not to even)
    assert TOK.quantize(1.0675) == 1.067  # binary value 1.06749999999999989 < tie: down (not to even)
    assert TOK.quantize(1.0005) == 1.0  # binary value 1.000499999... < tie
    two = NumberTokenizer(mantissa_digits=2)
    assert two.quantize(0.125) == 0.12
    assert two.quantize(0.375) == 0.38
    assert two.quantize(-0.125) == -0.12


def test_negative_numbers_mirror_positive() -> None:
    rng = np.random.default_rng(1)
    for v in 10.0 ** rng.uniform(-11, 10, 500):
        pos, neg = TOK.encode(float(v)), TOK.encode(float(-v))
        if TOK.quantize(float(v)) == 0.0:
            assert neg == pos  # zero is always "+"
        else:
            assert pos[0] == TOK.token_to_id("<+>") and neg[0] == TOK.token_to_id("<->")
            assert pos[1:] == neg[1:]
        assert TOK.quantize(float(-v)) == -TOK.quantize(float(v))


def test_zero() -> None:
    zero = ids_of(TOK, "+", TOK.min_exponent, "0000")
    assert TOK.encode(0.0) == zero
    assert TOK.encode(-0.0) == zero
    assert TOK.encode(-1e-30) == zero
    assert TOK.decode(zero) == 0.0
    neg_zero = TOK.decode(ids_of(TOK, "-", 3, "0000"))
    assert neg_zero == 0.0 and math.copysign(1.0, neg_zero) == 1.0
    many = TOK.decode_many(np.array([ids_of(TOK, "-", 3, "0000"), zero]))
    assert (many == 0.0).all() and not np.signbit(many).any()
    assert (TOK.encode_many(np.array([0.0, -0.0, 1e-300])) == np.array(zero)).all()


def test_clamping() -> None:
    assert TOK.largest == 9.999e8
    for v in [1e9, 9.9996e8, 1e20, 1e300, float("inf")]:
        assert TOK.quantize(v) == 9.999e8
        assert TOK.quantize(-v) == -9.999e8
        assert TOK.tokens(v) == ["<+>", "<E8>", "<9>", "<9>", "<9>", "<9>"]
    assert TOK.quantize(9.9994e8) == 9.999e8
    assert TOK.quantize(9.9984e8) == 9.998e8
    got = TOK.quantize_many(np.array([1e9, -np.inf, np.inf, 1e300, 9.9984e8]))
    assert got.tolist() == [9.999e8, -9.999e8, 9.999e8, 9.999e8, 9.998e8]


def test_gradual_underflow() -> None:
    assert TOK.smallest_normal == 1e-8
    assert TOK.smallest_positive == 1e-11
    # below the smallest normal: exponent pinned, leading zero digits, absolute grid 1e-11
    assert TOK.tokens(1.234e-9) == ["<+>", "<E-8>", "<0>", "<1>", "<2>", "<3>"]
    assert TOK.quantize(1.2345e-9) == 1.23e-9  # only 3 significant digits left at this magnitude
    assert TOK.quantize(1.236e-9) == 1.24e-9
    assert TOK.quantize(-3.21e-10) == -3.2e-10
    assert TOK.quantize(6e-12) == 1e-11
    assert TOK.quantize(4e-12) == 0.0
    assert TOK.quantize(-6e-12) == -1e-11
    # rounding up across the normal boundary becomes a normal number
    assert TOK.tokens(9.9996e-9) == ["<+>", "<E-8>", "<1>", "<0>", "<0>", "<0>"]
    # float64 subnormals are fine
    assert TOK.quantize(5e-324) == 0.0


def test_nan_raises() -> None:
    with pytest.raises(ValueError, match="NaN"):
        TOK.encode(float("nan"))
    with pytest.raises(ValueError, match="NaN"):
        TOK.quantize(float("nan"))
    with pytest.raises(ValueError, match="NaN"):
        TOK.encode_many(np.array([1.0, np.nan, 2.0]))


def test_decode_rejects_invalid_sequences() -> None:
    good = TOK.encode(3.0)
    with pytest.raises(ValueError):
        TOK.decode(good[:-1])
    with pytest.raises(ValueError):
        TOK.decode([*good, good[-1]])
    with pytest.raises(ValueError):
        TOK.decode([good[1], good[0], *good[2:]])
    with pytest.raises(ValueError):
        TOK.decode([*good[:-1], TOK.vocab_size])
    with pytest.raises(ValueError):
        TOK.decode_many(np.array([good, [good[1], good[0], *good[2:]]]))
    with pytest.raises(ValueError):
        TOK.decode_many(np.array([[*good[:-1], -1]]))
    with pytest.raises(ValueError):
        TOK.decode_many(np.array(good[:-1]))
    with pytest.raises(ValueError):
        TOK.decode_many(np.array(good, dtype=np.float64))


def test_non_canonical_sequences_decode() -> None:
    assert TOK.decode(ids_of(TOK, "+", 3, "0123")) == 123.0
    assert TOK.decode(ids_of(TOK, "-", 0, "0005")) == -0.005
    assert TOK.decode(ids_of(TOK, "+", 8, "9999")) == TOK.largest


@pytest.mark.parametrize("m", ALL_DIGITS)
def test_encode_is_canonical(m: int) -> None:
    tok = NumberTokenizer(mantissa_digits=m)
    rng = np.random.default_rng(7 + m)
    values = np.concatenate([log_uniform(rng, 2000, -14, 12), [0.0, -0.0, np.inf, -np.inf]])
    ids = tok.encode_many(values)
    first_digit = ids[:, 2] - tok.digit_offset
    exponent = ids[:, 1] - tok.exponent_offset + tok.min_exponent
    assert ((first_digit != 0) | (exponent == tok.min_exponent)).all()
    is_zero = (ids[:, 2:] == tok.digit_offset).all(axis=1)
    assert (ids[is_zero, 0] == 0).all()  # zero is "+"


# ------------------------------------------------------------------- every constrained sample is valid


@pytest.mark.parametrize("m", ALL_DIGITS)
def test_every_masked_sequence_decodes_to_finite_float(m: int) -> None:
    tok = NumberTokenizer(mantissa_digits=m)
    rng = np.random.default_rng(1000 + m)
    seqs = random_valid_sequences(tok, 100_000, rng)
    values = tok.decode_many(seqs)
    assert values.shape == (100_000,) and values.dtype == np.float64
    assert np.isfinite(values).all()
    assert (np.abs(values) <= tok.largest).all()
    for i in range(0, 100_000, 997):
        assert tok.decode(seqs[i].tolist()) == values[i]
    # batched shape (..., length) is preserved
    assert tok.decode_many(seqs[:12].reshape(3, 4, tok.length)).shape == (3, 4)
    assert (tok.decode_many(seqs[:12].reshape(3, 4, tok.length)).ravel() == values[:12]).all()


def test_extreme_configuration_is_finite() -> None:
    tok = NumberTokenizer(mantissa_digits=6, min_exponent=-280, max_exponent=280)
    seqs = random_valid_sequences(tok, 10_000, np.random.default_rng(3))
    assert np.isfinite(tok.decode_many(seqs)).all()
    assert tok.decode_many(np.array([ids_of(tok, "+", -280, "000001")]))[0] > 0
    values = log_uniform(np.random.default_rng(4), 2000, -290, 290)
    assert (tok.encode_many(values) == np.array([tok.encode(float(v)) for v in values])).all()


# --------------------------------------------------------------------------- vectorised == scalar


@pytest.mark.parametrize("m", ALL_DIGITS)
def test_encode_many_decode_many_agree_with_scalar(m: int) -> None:
    tok = NumberTokenizer(mantissa_digits=m)
    rng = np.random.default_rng(2000 + m)
    values = log_uniform(rng, 10_000, -6, 6)  # 12 orders of magnitude
    edge = [0.0, -0.0, np.inf, -np.inf, 1e9, 9.99995, 1e-8, 9.9996e-9, 5e-12, 1e-300, 5e-324, 1.0625]
    values = np.concatenate([values, edge, log_uniform(rng, 2000, -13, 10)])
    ids = tok.encode_many(values)
    assert ids.dtype == np.int64 and ids.shape == (len(values), tok.length)
    scalar_ids = np.array([tok.encode(float(v)) for v in values])
    np.testing.assert_array_equal(ids, scalar_ids)
    decoded = tok.decode_many(ids)
    scalar_decoded = np.array([tok.decode(row) for row in scalar_ids])
    np.testing.assert_array_equal(decoded, scalar_decoded)
    np.testing.assert_array_equal(decoded, [tok.quantize(float(v)) for v in values])


@pytest.mark.parametrize("m", ALL_DIGITS)
def test_encode_many_exact_on_near_ties(m: int) -> None:
    """Decimal midpoints between representable values (and their float neighbours) stress rounding."""
    tok = NumberTokenizer(mantissa_digits=m)
    rng = np.random.default_rng(3000 + m)
    q = rng.integers(10 ** (m - 1), 10**m, size=500)
    e = rng.integers(-8, 9, size=500)
    mids = np.array([float(Decimal(f"{int(qi)}.5E{int(ei) - m + 1}")) for qi, ei in zip(q, e, strict=True)])
    values = np.concatenate([mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf)])
    powers = 10.0 ** np.arange(-12, 11)  # decade boundaries, where log10 may be off by one
    values = np.concatenate([values, powers, np.nextafter(powers, 0), np.nextafter(powers, np.inf)])
    values = np.concatenate([values, -values, [0.125, 0.375, 1.0625, 2.675, 8.5, 9.5]])
    np.testing.assert_array_equal(tok.encode_many(values), [tok.encode(float(v)) for v in values])


def test_quantize_matches_decimal_reference() -> None:
    """Independent reference: Python's correctly rounded '%.3e' formatting (normal range only)."""
    rng = np.random.default_rng(5)
    for v in log_uniform(rng, 3000, -7.9, 8.9):
        expected = float(f"{float(v):.3e}")
        if abs(expected) <= TOK.largest:
            assert TOK.quantize(float(v)) == expected


# --------------------------------------------------------------------------- monotonicity


@pytest.mark.parametrize("m", ALL_DIGITS)
def test_quantize_preserves_order(m: int) -> None:
    tok = NumberTokenizer(mantissa_digits=m)
    rng = np.random.default_rng(4000 + m)
    values = np.sort(np.concatenate([log_uniform(rng, 20_000, -14, 11), [0.0, np.inf, -np.inf]]))
    q = tok.quantize_many(values)
    assert (np.diff(q) >= 0).all()
    # dense around one decade boundary and the normal/denormal boundary
    for centre in (10.0, 1e-8, 1e9):
        dense = np.sort(centre * (1 + rng.uniform(-0.01, 0.01, 5000)))
        assert (np.diff(tok.quantize_many(dense)) >= 0).all()


@settings(max_examples=300, deadline=None)
@given(
    st.floats(allow_nan=False, allow_infinity=True),
    st.floats(allow_nan=False, allow_infinity=True),
    st.integers(min_value=1, max_value=6),
)
def test_quantize_monotone_property(a: float, b: float, m: int) -> None:
    tok = NumberTokenizer(mantissa_digits=m)
    lo, hi = min(a, b), max(a, b)
    assert tok.quantize(lo) <= tok.quantize(hi)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=True), st.integers(min_value=1, max_value=6))
def test_quantize_error_bound_and_idempotence(x: float, m: int) -> None:
    tok = NumberTokenizer(mantissa_digits=m)
    q = tok.quantize(x)
    assert math.isfinite(q)
    assert tok.quantize(q) == q
    assert tok.decode(tok.encode(x)) == q
    assert tok.encode_many(np.array([x])).tolist() == [tok.encode(x)]
    if abs(x) <= tok.largest:
        if abs(x) >= tok.smallest_normal:
            assert abs(q - x) <= 0.5 * 10.0 ** (1 - m) * abs(x) * (1 + 1e-12)
        else:
            assert abs(q - x) <= 0.5 * tok.smallest_positive * (1 + 1e-9)


# --------------------------------------------------------------------------- config / serialisation


@pytest.mark.parametrize("m", ALL_DIGITS)
def test_to_dict_from_dict_round_trip(m: int) -> None:
    tok = NumberTokenizer(mantissa_digits=m, min_exponent=-5, max_exponent=11)
    d = json.loads(json.dumps(tok.to_dict()))
    back = NumberTokenizer.from_dict(d)
    assert back == tok
    assert back.vocab == tok.vocab
    assert back.encode(123.456) == tok.encode(123.456)
    with pytest.raises(ValueError):
        NumberTokenizer.from_dict({**d, "type": "Other"})
    with pytest.raises(ValueError):
        NumberTokenizer.from_dict({**d, "bogus": 1})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mantissa_digits": 0},
        {"mantissa_digits": 16},
        {"min_exponent": 3, "max_exponent": 2},
        {"max_exponent": 400},
        {"mantissa_digits": 2.5},
        {"mantissa_digits": True},
        {"signed": "no"},
    ],
)
def test_invalid_configs(kwargs: dict) -> None:
    with pytest.raises((ValueError, TypeError)):
        NumberTokenizer(**kwargs)


def test_hashable_and_frozen() -> None:
    assert hash(NumberTokenizer()) == hash(NumberTokenizer())
    with pytest.raises(AttributeError):
        TOK.mantissa_digits = 5  # type: ignore[misc]


def test_unsigned_single_decade_format_forces_sign_and_exponent() -> None:
    tok = NumberTokenizer(mantissa_digits=4, min_exponent=0, max_exponent=0, signed=False)
    mask = tok.position_mask()
    assert mask.sum(axis=1).tolist() == [1, 1, 10, 10, 10, 10]  # only the digits are choices
    assert tok.possible_next_tokens([]) == [tok.token_to_id("<+>")]
    assert tok.tokens(3.25) == ["<+>", "<E0>", "<3>", "<2>", "<5>", "<0>"]
    values = np.array([1.0, 9.999, 0.5])
    np.testing.assert_array_equal(tok.decode_many(tok.encode_many(values)), values)
    for encode in (tok.encode, lambda v: tok.encode_many(np.array([v]))):
        with pytest.raises(ValueError, match="negative"):
            encode(-1.0)
    with pytest.raises(ValueError, match="not allowed"):
        tok.decode([tok.token_to_id("<->"), tok.token_to_id("<E0>"), *[tok.digit_offset] * 4])
    assert NumberTokenizer.from_dict(tok.to_dict()) == tok
