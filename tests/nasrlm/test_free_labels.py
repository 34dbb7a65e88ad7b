from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from nasrlm.free_labels import ArchitectureBuildError, free_labels, texts_and_free_labels
from nasrlm.label_cache import LabelCache
from search_spaces import NasBench201


class CountingNB201(NasBench201):
    """NB201 that counts its ONNX builds (a torch space pays a trace for each)."""

    builds = 0

    def build_onnx(self, arch):
        self.builds += 1
        return super().build_onnx(arch)


def test_free_labels_of_a_known_cell() -> None:
    space = NasBench201()
    arch = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"
    params, macs = free_labels(space, [arch])[0]
    assert params == 1.531546  # the largest NB201 network, as NAS-Bench-201 counts it (1.53 M)
    assert 200 < macs < 250  # ~220 MFLOPs in NAS-Bench-201's table (MACs + a few element-wise ops)


def test_texts_and_free_labels_build_each_architecture_once(tmp_path) -> None:
    space = CountingNB201()
    ids = space.sample_ids(5, seed=4)
    texts, labels = texts_and_free_labels(space, ids, cache=None)
    assert space.builds == len(ids)
    assert texts == [space.to_text(space.parse(i)) for i in ids]
    cache = LabelCache(tmp_path / "labels.db")
    np.testing.assert_array_equal(labels, free_labels(space, ids, cache=cache))
    built = space.builds
    np.testing.assert_array_equal(labels, free_labels(space, ids, cache=cache))
    assert space.builds == built  # the second time, every row came from the cache


class BrokenNB201(NasBench201):
    """NB201 whose ``build_onnx`` raises for cells with a ``none`` edge, as a space with a bug would."""

    def build_onnx(self, arch):
        if "none" in self.arch_id(arch):
            raise ValueError("none edges unsupported")
        return super().build_onnx(arch)


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_architecture_the_space_cannot_build_is_named(jobs: int) -> None:
    space = BrokenNB201()
    with pytest.raises(ArchitectureBuildError, match=r"nb201 architecture \|.*none.* failed to build: "
                                                     r"ValueError: none edges unsupported"):
        texts_and_free_labels(space, space.sample_ids(300, seed=0), cache=None, jobs=jobs)


def _describe_in_a_daemon(queue: multiprocessing.Queue) -> None:
    space = NasBench201()
    ids = space.sample_ids(300, seed=1)  # enough to ask for a pool of processes
    queue.put(free_labels(space, ids, cache=None, jobs=2).shape)


def test_a_daemonic_process_describes_without_a_pool_of_its_own() -> None:
    # a daemonic process may not have children: a search in a Pool worker, or in a daemon worker, once
    # crashed here ("daemonic processes are not allowed to have children")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_describe_in_a_daemon, args=(queue,), daemon=True)
    process.start()
    process.join(timeout=300)
    assert process.exitcode == 0
    assert queue.get(timeout=5) == (300, 2)
