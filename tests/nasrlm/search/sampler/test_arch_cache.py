"""What the sampler caches of each architecture: ids behind parameters, texts, free and graph labels."""

from __future__ import annotations

import numpy as np
import optuna
import pytest

from nasrlm.free_labels import ALL_FREE_OBJECTIVES, ArchitectureBuildError
from nasrlm.search import ArchCache, SpaceMismatchError
from search_spaces import NasBench201

SPACE = NasBench201()



def test_each_architecture_is_described_once(monkeypatch) -> None:
    import nasrlm.search.sampler._arch_cache as module

    calls: list[int] = []
    real = module.describe

    def counting(space, ids, **kw):
        calls.append(len(ids))
        return real(space, ids, **kw)

    monkeypatch.setattr(module, "describe", counting)
    cache = ArchCache(SPACE)
    ids = SPACE.sample_ids(3, seed=0)
    first = cache.labels_of(ids)
    again = cache.labels_of([ids[1], ids[1], *SPACE.sample_ids(1, seed=9)])
    assert calls == [3, 1]  # the repeated ids are not described again, the new one is
    assert np.array_equal(again[0], first[1]) and first.shape == (3, 2)
    assert cache.texts_of(ids[:1]) == [SPACE.to_text(SPACE.parse(ids[0]))]


def test_architectures_that_compute_one_function_share_a_class() -> None:
    cache = ArchCache(SPACE)
    chance = ["|none~0|+|none~0|none~1|+|none~0|none~1|none~2|",  # no edge at all
              "|none~0|+|none~0|none~1|+|none~0|none~1|nor_conv_3x3~2|"]  # a convolution of zeros
    live = "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    classes = cache.classes_of([*chance, live, live])
    members = [chance[0], *(SPACE.arch_id(a) for a in SPACE.equivalents(SPACE.parse(chance[0])))]
    assert classes[0] == classes[1] == min(members)  # named by the smallest id of the class
    assert classes[2] == classes[3] != classes[0]


def test_graph_labels_follow_the_free_labels_and_split_by_name() -> None:
    cache = ArchCache(SPACE, graph=True)
    labels = cache.labels_of(SPACE.sample_ids(2, seed=1))
    assert labels.shape == (2, len(ALL_FREE_OBJECTIVES))
    assert cache.columns == tuple(o.name for o in ALL_FREE_OBJECTIVES)
    free, graph = cache.split(labels)
    assert list(free) == ["params_m", "macs_m"] and len(graph) == len(ALL_FREE_OBJECTIVES) - 2
    assert ArchCache(SPACE).split(labels[:, :2])[1] == {}


def test_the_id_behind_parameters_and_a_clear_error_for_foreign_ones() -> None:
    cache = ArchCache(SPACE)
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
    arch_id = SPACE.arch_id(SPACE.suggest(trial))
    assert cache.arch_id_of(trial.params) == arch_id
    with pytest.raises(SpaceMismatchError, match="space.suggest"):
        cache.arch_id_of({"x": 0.5})


def test_an_architecture_the_space_cannot_build_is_left_out_with_its_error() -> None:
    class Broken(NasBench201):
        def build_onnx(self, arch):
            if "none" in self.arch_id(arch):
                raise ValueError("none edges unsupported")
            return super().build_onnx(arch)

    space = Broken()
    cache = ArchCache(space, cache=None)
    ids = space.sample_ids(20, seed=0)
    kept = cache.buildable(ids)
    assert kept == [i for i in ids if "none" not in i] and 0 < len(kept) < len(ids)
    assert set(cache.failed) == set(ids) - set(kept)
    assert all(m.endswith("failed to build: ValueError: none edges unsupported")
               for m in cache.failed.values())
    assert cache.labels_of(kept).shape == (len(kept), 2)
    with pytest.raises(ArchitectureBuildError, match="none edges unsupported"):
        cache.texts_of(ids)
