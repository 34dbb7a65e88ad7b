"""The registry: built-ins by name, user registration, entry-point plug-ins, helpful errors."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import search_spaces
from search_spaces import NasBench201, UnknownSpaceError, available_spaces, get_space, register_space
from search_spaces._registry import _FACTORIES
from search_spaces.testing import SearchSpaceTests


class _Mine(NasBench201):
    name = "mine"


@pytest.fixture
def clean_registry():
    saved = dict(_FACTORIES)
    yield
    _FACTORIES.clear()
    _FACTORIES.update(saved)


def test_builtin_by_name_gives_a_fresh_instance() -> None:
    assert "nb201" in available_spaces()
    assert get_space("nb201") is not get_space("nb201")


def test_register_and_refuse_to_shadow(clean_registry) -> None:
    register_space("mine", _Mine)
    assert isinstance(get_space("mine"), _Mine) and "mine" in available_spaces()
    with pytest.raises(ValueError, match="already registered"):
        register_space("mine", _Mine)
    register_space("mine", NasBench201, overwrite=True)
    assert type(get_space("mine")) is NasBench201
    with pytest.raises(ValueError, match="no spaces"):
        register_space("my space", _Mine)


def test_unknown_name_suggests_a_close_one() -> None:
    with pytest.raises(UnknownSpaceError, match="did you mean 'nb201'") as info:
        get_space("nb210")
    assert isinstance(info.value, ValueError) and "Available: " in str(info.value)


def test_entry_point_plugins_are_found(monkeypatch) -> None:
    plugin = EntryPoint("plugged", "tests_registry_target:factory", search_spaces.ENTRY_POINT_GROUP)
    monkeypatch.setattr("search_spaces._registry.entry_points",
                        lambda group: [plugin] if group == search_spaces.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(EntryPoint, "load", lambda self: _Mine)
    assert "plugged" in available_spaces()
    assert isinstance(get_space("plugged"), _Mine)


def test_a_plugin_that_is_not_a_space_is_rejected(monkeypatch) -> None:
    plugin = EntryPoint("broken", "x:y", search_spaces.ENTRY_POINT_GROUP)
    monkeypatch.setattr("search_spaces._registry.entry_points", lambda group: [plugin])
    monkeypatch.setattr(EntryPoint, "load", lambda self: dict)
    with pytest.raises(TypeError, match="did not produce a SearchSpace"):
        get_space("broken")


class _SpaceAFreshProcessCannotFind(SearchSpaceTests):
    space = NasBench201()

    def _fresh_space_code(self) -> str:
        return "from search_spaces import get_space; s = get_space('tinymb_not_loaded')"


def test_a_failing_fresh_process_shows_its_own_error() -> None:
    with pytest.raises(pytest.fail.Exception, match="unknown search space 'tinymb_not_loaded'"):
        _SpaceAFreshProcessCannotFind().test_text_is_identical_across_processes()
