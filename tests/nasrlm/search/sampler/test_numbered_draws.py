"""Random trials by trial number: one worker's trials as before, many workers' the same ones."""

from __future__ import annotations

import pickle

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.samplers import RandomSampler

from nasrlm.search import RLMSampler, worker_seed
from nasrlm.search.sampler._numbered_draws import NumberedDraws
from search_spaces import NasBench201, SearchSpace

SPACE = NasBench201()
STARTUP = 6


def stream(space: SearchSpace, sampler: optuna.samplers.BaseSampler, count: int) -> list[str]:
    """The architectures of ``count`` trials asked of one study in turn (none evaluated)."""
    study = optuna.create_study(sampler=sampler)
    return [space.arch_id(space.suggest(study.ask())) for _ in range(count)]


def startup_trials(samplers: list[RLMSampler], count: int) -> list[str]:
    """The architectures of ``count`` start-up trials of one study whose workers, one sampler each, ask in
    turn, each trial told (a toy value) before the next is asked."""
    storage = optuna.storages.InMemoryStorage()
    optuna.create_study(storage=storage, study_name="s", directions=["maximize", "minimize"])
    studies = [optuna.load_study(study_name="s", storage=storage, sampler=s) for s in samplers]
    ids = []
    for k in range(count):
        study = studies[k % len(studies)]
        trial = study.ask()
        ids.append(SPACE.arch_id(SPACE.suggest(trial)))
        study.tell(trial, [float(k), float(-k)])
    return ids


def sampler(seed: int, tmp_path) -> RLMSampler:
    return RLMSampler(SPACE, seed=seed, n_startup_trials=STARTUP, label_cache=tmp_path / "labels.db")


def test_the_nth_draw_is_the_nth_trial_of_random_sampler_s_stream() -> None:
    draws = NumberedDraws(SPACE, seed=7)
    expected = stream(SPACE, RandomSampler(seed=7), 5)
    assert [SPACE.arch_id(SPACE.suggest(optuna.trial.FixedTrial(draws.params(n)))) for n in (3, 0, 4, 1, 2)] \
        == [expected[n] for n in (3, 0, 4, 1, 2)]


class ThirdFails:
    """NB201, except that the third architecture drawn cannot be built."""

    calls = 0

    def suggest(self, trial: optuna.Trial) -> object:
        arch, self.calls = SPACE.suggest(trial), self.calls + 1
        if self.calls == 3:
            raise ValueError("cannot build it")
        return arch


def test_a_draw_the_space_cannot_build_keeps_its_place_and_fails_no_later_trial() -> None:
    draws = NumberedDraws(ThirdFails(), seed=7)
    expected = stream(SPACE, RandomSampler(seed=7), 4)
    assert SPACE.arch_id(SPACE.suggest(optuna.trial.FixedTrial(draws.params(3)))) == expected[3]
    assert SPACE.arch_id(SPACE.suggest(optuna.trial.FixedTrial(draws.params(2)))) == expected[2]


def test_a_parameter_outside_the_draw_is_drawn_by_trial_number() -> None:
    study = optuna.create_study()
    first, second = study.ask(), study.ask()
    lr = FloatDistribution(1e-4, 1e-1)
    draws, again = NumberedDraws(SPACE, seed=0), NumberedDraws(SPACE, seed=0)
    name, value = next(iter(draws.params(1).items()))
    assert draws.sample(study, second, name, CategoricalDistribution([value, "other"])) == value
    assert draws.sample(study, second, name, CategoricalDistribution(["other"])) == "other"
    assert draws.sample(study, second, "lr", lr) == again.sample(study, second, "lr", lr)  # another worker
    assert draws.sample(study, first, "lr", lr) != draws.sample(study, second, "lr", lr)


def test_one_worker_starts_from_random_sampler_s_trials(tmp_path) -> None:
    assert startup_trials([sampler(3, tmp_path)], STARTUP) == stream(SPACE, RandomSampler(seed=3), STARTUP)


def test_workers_sharing_a_seed_start_from_one_worker_s_trials(tmp_path) -> None:
    one = startup_trials([sampler(5, tmp_path)], STARTUP)
    three = startup_trials([sampler(5, tmp_path / str(k)) for k in range(3)], STARTUP)
    assert three == one
    assert len(set(three)) == STARTUP  # not the same first trial in every worker


def test_an_independent_sampler_given_draws_as_it_always_did(tmp_path) -> None:
    given = RLMSampler(SPACE, seed=3, n_startup_trials=STARTUP, label_cache=tmp_path / "labels.db",
                       independent_sampler=RandomSampler(seed=11))
    assert startup_trials([given], STARTUP) == stream(SPACE, RandomSampler(seed=11), STARTUP)


@pytest.mark.parametrize(("name", "expected"),
                         [("rlm", [4, 4, 4]), ("tpe", [4, 5, 6]), ("random", [4, 5, 6])])
def test_rlm_workers_share_the_seed_and_optuna_s_samplers_take_one_each(name: str, expected: list[int]
                                                                          ) -> None:
    assert [worker_seed(name, 4, k) for k in range(3)] == expected


def test_the_random_stream_goes_on_where_it_stood_after_a_pickle() -> None:
    draws = NumberedDraws(SPACE, seed=3)
    first = [draws.params(n) for n in range(3)]
    loaded = pickle.loads(pickle.dumps(draws))
    fresh = NumberedDraws(SPACE, seed=3)
    assert [loaded.params(n) for n in range(6)] == [fresh.params(n) for n in range(6)]
    assert [loaded.params(n) for n in range(3)] == first
