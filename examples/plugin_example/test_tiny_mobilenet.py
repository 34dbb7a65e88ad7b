"""Conformance of the example space: the whole suite from one subclass, plus one check of our own.

Run from the repository root: ``python -m pytest examples/plugin_example -q``.
"""

from __future__ import annotations

from tiny_mobilenet import TinyMobileNet

from exporters import count_parameters
from search_spaces.testing import SearchSpaceTests


class TestTinyMobileNet(SearchSpaceTests):
    space = TinyMobileNet()


def test_exported_parameters_are_the_modules() -> None:
    space = TinyMobileNet()
    arch = space.parse("k3e6+k5e1-k3e3-k5e6+k3e3")
    module = space.seeded_module(arch)
    assert count_parameters(space.to_onnx(arch)) == sum(p.numel() for p in module.parameters())
