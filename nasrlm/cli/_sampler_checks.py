"""``nasrlm search --rlm-option``: ``KEY=VALUE`` pairs, re-checked against the type hints of
:class:`RLMSampler`'s flat options (:func:`~nasrlm.search.sampler_keywords`) and of
:class:`~nasrlm.rlm.model.RLMConfig` before any work starts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import search_spaces
from nasrlm.cli._common import CliError, _device


def _rlm_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; values are JSON where they parse (2.5, true, {"d_model": 32}), else strings."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--rlm-option takes KEY=VALUE, got {pair!r}")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options


def _check_rlm_options(options: dict[str, Any], space: search_spaces.SearchSpace) -> None:
    """``--rlm-option`` values checked against :class:`RLMSampler`'s flat options before any work: a name
    it lacks, a value of the wrong type (``num_candidates=abc``), a model setting ``RLMConfig`` lacks
    (which would otherwise fail at the first model fit), a bad device. (A base is ``--base``'s, checked
    where the command reads it.)"""
    from nasrlm.search.sampler import OPTIONS, option_hints

    hints = option_hints()
    for key, value in options.items():
        if key not in OPTIONS:
            raise CliError(f"--rlm-option: unknown rlm option {key!r}; choose from {', '.join(OPTIONS)}")
        if not _fits(value, hints[key]):
            raise CliError(f"--rlm-option {key}={json.dumps(value)}: expected {_kind(hints[key])}")
    if options.get("model") is not None:
        _check_model_settings(options["model"])
    if "device" in options:
        options["device"] = _device(options["device"], "--rlm-option device")


def _check_model_settings(model: dict[str, Any]) -> None:
    """``--rlm-option model={...}``: only :class:`~nasrlm.rlm.model.RLMConfig` settings a user may change,
    each of its type and positive, and consistent together (``d_model`` a multiple of ``num_heads``)."""
    import dataclasses
    import typing

    from nasrlm.rlm.model import RLMConfig

    fixed = {"text_vocab_size", "text_pad_id", "objectives"}  # set from the tokenizer and the objectives
    hints = typing.get_type_hints(RLMConfig)
    known = [f.name for f in dataclasses.fields(RLMConfig) if f.name not in fixed]
    unknown = sorted(set(model) - set(known))
    if unknown:
        raise CliError(f"--rlm-option model: unknown setting(s) {', '.join(unknown)}; "
                       f"choose from {', '.join(known)}")
    for key, value in model.items():
        if not _fits(value, hints[key]):
            raise CliError(f"--rlm-option model: {key} {json.dumps(value)}: expected {_kind(hints[key])}")
        if key == "dropout" and not 0 <= value < 1:
            raise CliError(f"--rlm-option model: dropout {value}: expected a number in [0, 1)")
        if hints[key] is int and value < 1:
            raise CliError(f"--rlm-option model: {key} {value}: expected 1 or more")
    try:
        RLMConfig(text_vocab_size=1, text_pad_id=0, objectives=("x",), **model)
    except ValueError as error:
        raise CliError(f"--rlm-option model: {error}") from None


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value suits a type hint: ``int`` (not bool), ``float`` (or int), ``str``, ``bool``,
    ``dict``, ``None``, or a union of them; other hints (``Any``) take anything."""
    import types
    import typing

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    hint = origin or hint
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (str, bool, dict, list):
        return isinstance(value, hint)
    return True


def _kind(hint: Any) -> str:
    """A type hint in words, for :func:`_fits`'s refusals: ``int | None`` -> "a whole number or null"."""
    import types
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_kind(arg) for arg in typing.get_args(hint))
    words = {int: "a whole number", float: "a number", str: "a string", bool: "true or false",
             dict: 'a JSON object such as {"d_model": 64}', list: "a JSON list", type(None): "null"}
    return words.get(typing.get_origin(hint) or hint, str(hint))


def _check_sampler(name: str, space: search_spaces.SearchSpace, seed: int, options: dict[str, Any]) -> None:
    """Build the sampler once, as the search will: what it or its settings objects refuse
    (``temperature=0``, ``model`` with ``base``) is refused before any file is written."""
    from nasrlm.search import make_sampler

    try:
        make_sampler(name, space, seed, options=options)
    except ValueError as error:  # RLMSampler and its settings objects check with ValueError
        raise CliError(f"--rlm-option: {error}") from None
