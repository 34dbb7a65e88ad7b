"""What the benchmark scripts share: the gradient-boosted-trees baseline, texts and graph labels through the
label cache, the RLMSampler of their ``--smoke`` runs, and the line that names the machine a run was on."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import numpy as np

from nasrlm.free_labels import texts_and_free_labels
from search_spaces import SearchSpace

#: ``--smoke``'s RLMSampler options by name (``sampler_keywords``): a model and candidate pool small enough
#: to refit in a second.
SMOKE_RLM = {"n_startup_trials": 4, "proposals_per_fit": 4, "num_candidates": 60, "fresh_candidates": 10,
             "num_samples": 4, "pretrain_archs": 0, "fit_steps": 5,
             "model": {"d_model": 16, "num_heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1,
                       "dropout": 0.0}}


def gbdt_predict(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, seed: int) -> np.ndarray:
    """Predictions (len(x_test), objectives); each objective is fitted on its known (non-NaN) rows."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    out = np.empty((len(x_test), y_train.shape[1]))
    for k in range(y_train.shape[1]):
        known = ~np.isnan(y_train[:, k])
        leaf = max(2, min(20, int(known.sum()) // 20))  # sklearn's default of 20 starves small N
        model = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, min_samples_leaf=leaf,
                                              random_state=seed)
        model.fit(x_train[known], y_train[known, k])
        out[:, k] = model.predict(x_test)
    return out


def encoded(space: SearchSpace, ids: list[str]) -> tuple[list[str], np.ndarray]:
    """Texts and every free label (graph labels included) of ``ids``, through the label cache."""
    return texts_and_free_labels(space, ids, graph=True, progress=True)


def smoke_base(folder: Path, texts: list[str], *, accuracy_rank: bool = False) -> Path:
    """An untrained tiny base in ``folder / "base"`` whose tokenizer knows ``texts``, with a tag for every
    free label and, with ``accuracy_rank``, the cross-space accuracy rank (the tag a new accuracy starts
    from): the base of the ``--smoke`` runs."""
    from nasrlm.free_labels import ALL_FREE_OBJECTIVES
    from nasrlm.priors.transfer import ACCURACY_RANK
    from nasrlm.rlm.normalize import Normalizer
    from nasrlm.rlm.predictor import RLMPredictor
    from nasrlm.rlm.tokenizers import OnnxTokenizer

    tags = [*ALL_FREE_OBJECTIVES, *([ACCURACY_RANK] if accuracy_rank else [])]
    predictor = RLMPredictor.from_scratch(tags, size="tiny", tokenizer=OnnxTokenizer.train(texts, seed=0),
                                          d_model=16, d_ff=32)
    if accuracy_rank:
        predictor.lm.normalizers[ACCURACY_RANK.name] = Normalizer.fit(np.linspace(0, 1, 11))
    return predictor.save(folder / "base")


def machine() -> str:
    """The processor and the BLAS kernels numpy and scipy run on, e.g. ``x86_64, openblas Haswell kernels``.

    A search replays its trials only on the same kernels: OpenBLAS picks them by the processor (and
    ``OPENBLAS_CORETYPE``), and a last-bit difference in one product sends the proposals elsewhere.
    """
    from threadpoolctl import threadpool_info  # scikit-learn's dependency

    kernels = sorted({f"{i.get('internal_api', '?')} {i.get('architecture', '?')}" for i in threadpool_info()
                      if i.get("user_api") == "blas"})  # numpy's and scipy's libraries, once each
    return f"{platform.processor() or platform.machine()}, {' / '.join(kernels) or 'unknown BLAS'} kernels"


def timed_search(space: SearchSpace, evaluator: Any, sampler: str, seed: int, budget: int, rlm_options: str
                 ) -> tuple[Any, float]:
    """One study of ``sampler`` seeded ``seed`` (``rlm_options``, JSON, are the RLM sampler's), ``budget``
    evaluations in memory, as the benchmarks run each: its :class:`~nasrlm.search.SearchResult`, seconds."""
    import json
    import time

    from nasrlm.search import make_sampler, run_search

    start = time.perf_counter()
    options = json.loads(rlm_options) if sampler == "rlm" else None
    result = run_search(space, evaluator, make_sampler(sampler, space, seed, options=options), budget=budget,
                        label=sampler, study_name=f"{sampler}-{seed}", progress=False)
    return result, time.perf_counter() - start
