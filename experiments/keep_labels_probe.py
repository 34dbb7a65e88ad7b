"""Ablation (reverted once measured): the language model alone's decoder-only fine-tune keeps NB201's
graph labels in its loss, decoded after accuracy on ``--pool`` unlabelled cells (neither labelled nor
tested; the labels are targets, never inputs). Labelled rows carry accuracy only; pool rows are marked
derived from a training row, so validation (early stopping) reads the labelled rows' accuracy alone.
``--pool 0``: the plain fine-tune.

    python experiments/keep_labels_probe.py --data-dir ../shared/data --seeds 0 --pool 300
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np
from _common import encoded
from scipy import stats

from nasrlm.data import Objective, load_table
from nasrlm.free_labels import ALL_FREE_OBJECTIVES
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.presets import DECODER_TUNE
from nasrlm.rlm.training import TrainConfig, train
from search_spaces import get_space


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--base", help="base model directory (default: the shipped one)")
    p.add_argument("--seeds", default="0")
    p.add_argument("--n", type=int, default=100, help="labelled cells")
    p.add_argument("--pool", type=int, default=300, help="unlabelled cells, graph labels in the loss")
    p.add_argument("--test", type=int, default=5000)
    a = p.parse_args()

    space = get_space("nb201")
    table = load_table("nb201", ["acc"], a.data_dir)
    texts, free = encoded(space, list(table.ids))
    names = [o.name for o in ALL_FREE_OBJECTIVES]
    y_all = table.column("acc")
    for seed in (int(s) for s in a.seeds.split(",")):
        order = np.random.default_rng(seed).permutation(len(table.ids))
        labelled, test = order[: a.n], order[a.n : a.n + a.test]
        pool = order[a.n + a.test : a.n + a.test + a.pool]
        predictor = RLMPredictor.from_base(a.base, [Objective("acc", "%", "target", "benchmark", True)],
                                           space="nb201")
        labels = [nm for k, nm in enumerate(names)
                  if np.std(free[pool, k]) > 0 and nm in predictor.normalizers]
        predictor.normalizers["acc"] = Normalizer.fit(y_all[labelled])
        objectives = ("acc", *labels)
        n, m = len(labelled), len(pool)
        values = np.full((n + m, len(objectives)), np.nan)
        values[:n, 0] = y_all[labelled]
        for j, name in enumerate(labels, start=1):
            values[n:, j] = free[pool, names.index(name)]
        # the pool rows hang on a training row (train() holds out the first tenth of this permutation)
        anchor = int(np.random.default_rng(seed).permutation(n)[max(1, round(0.1 * n))])
        derived = np.concatenate([np.full(n, -1), np.full(m, anchor)]) if m else None
        schedule = dataclasses.replace(DECODER_TUNE)
        config = TrainConfig(batch_size=32, seed=seed, progress=False, freeze_encoder=True,
                             **schedule.settings(n + m, 32))
        start = time.perf_counter()
        inputs = predictor.encode_texts([texts[i] for i in (*labelled, *pool)])
        report = train(predictor.model, inputs, predictor._targets(values, objectives), objectives, config,
                       derived_from=derived)
        seconds = time.perf_counter() - start
        predictor.decode_order = ("acc",)
        draws = predictor.sample([texts[i] for i in test], ["acc"], num_samples=32, batch_size=64, seed=seed)
        tau = stats.kendalltau(np.median(draws, axis=1)[:, 0], y_all[test]).statistic
        print(f"seed {seed}: {n} labelled, {m} unlabelled with {len(labels)} graph labels: tau {tau:.3f}, "
              f"fit {seconds:.0f} s, best epoch {report.best_epoch + 1} of {len(report.train_loss)}",
              flush=True)


if __name__ == "__main__":
    main()
