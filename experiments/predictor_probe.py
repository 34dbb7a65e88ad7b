"""One quick predictor run on NAS-Bench-201: pre-training on free labels, then few labels, given free labels.

A probe for tuning, not the benchmark (``predictor_benchmark.py`` runs the full protocol): one seed,
a smaller test set, 16 decoded samples. Free labels of all 15,625 cells are cached in ``--cache``.

    python experiments/predictor_probe.py --data-dir ../shared/data --n 100 --pre-epochs 3 --given \\
        --objectives acc,pixel3 --model sampler
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import kendalltau, spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nasrlm.data import load_table  # noqa: E402
from nasrlm.free_labels import FREE_LABELS_VERSION, FREE_OBJECTIVES, texts_and_free_labels  # noqa: E402
from nasrlm.predictor import RLMPredictor  # noqa: E402
from nasrlm.presets import SIZES  # noqa: E402
from nasrlm.tokenizers import OnnxTokenizer  # noqa: E402
from nasrlm.training import TrainConfig  # noqa: E402
from search_spaces import NasBench201  # noqa: E402

FREE = tuple(o.name for o in FREE_OBJECTIVES)


def cached_texts_and_free_labels(space: NasBench201, ids: list[str], cache: Path
                                 ) -> tuple[list[str], np.ndarray]:
    if cache.exists():
        z = np.load(cache, allow_pickle=False)
        if "version" in z.files and int(z["version"]) == FREE_LABELS_VERSION and list(z["ids"]) == ids:
            return list(z["texts"]), z["free"]
    texts, free = texts_and_free_labels(space, ids, progress=True)  # one ONNX build per architecture
    np.savez(cache, ids=np.array(ids), texts=np.array(texts), free=free, version=FREE_LABELS_VERSION)
    return texts, free


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--objectives", default="acc,pixel3,eyeriss,gold_6226,1080ti_1")
    p.add_argument("--n", type=int, default=1000, help="labelled training architectures")
    p.add_argument("--test", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pre-epochs", type=int, default=0, help="passes over the free labels (0: none)")
    p.add_argument("--pre-n", type=int, default=15625, help="architectures pre-trained on")
    p.add_argument("--given", action="store_true", help="decode free labels first; give them at inference")
    p.add_argument("--prior", action="store_true",
                   help="with --given: learn the objectives as residuals of the free-label prior")
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--model", choices=list(SIZES), default="compact")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cache", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "nb201_free.npz")
    a = p.parse_args()
    if a.prior and not a.given:
        p.error("--prior needs --given (the prior reads the free labels at inference)")
    torch.set_num_threads(a.threads)
    objectives = tuple(a.objectives.split(","))
    space = NasBench201()
    table = load_table("nb201", objectives, a.data_dir)
    texts, free = cached_texts_and_free_labels(space, list(table.ids), a.cache)
    order = np.random.default_rng(a.seed).permutation(len(table.ids))
    test, train = order[: a.test], order[5000 : 5000 + a.n]  # the benchmark's split: train after 5,000
    predictor = RLMPredictor.create(OnnxTokenizer.train_on_spaces(seed=0),
                                    [*FREE_OBJECTIVES, *table.objectives], **SIZES[a.model])
    torch.manual_seed(a.seed)
    start = time.perf_counter()
    if a.pre_epochs:
        pre = np.random.default_rng(100 + a.seed).permutation(len(table.ids))[: a.pre_n]
        config = TrainConfig(max_epochs=a.pre_epochs, seed=a.seed, validation_fraction=0, learning_rate=a.lr)
        predictor.fit([texts[i] for i in pre], free[pre], FREE, config)
    pre_s = time.perf_counter() - start
    names = (*FREE, *objectives) if a.given else objectives
    values = np.hstack([free[train], table.values[train]]) if a.given else table.values[train]
    config = TrainConfig(max_epochs=a.epochs, seed=a.seed, validation_fraction=0, learning_rate=a.lr)
    predictor.fit([texts[i] for i in train], values, names, config, prior_from=FREE if a.prior else ())
    fit_s = time.perf_counter() - start - pre_s
    given = {n: free[test, k] for k, n in enumerate(FREE)} if a.given else None
    median = np.median(predictor.sample([texts[i] for i in test], objectives, num_samples=16, seed=0,
                                        given=given), axis=1)
    truth = table.values[test]
    scores = {n: {"kendall": round(float(kendalltau(median[:, k], truth[:, k])[0]), 3),
                  "spearman": round(float(spearmanr(median[:, k], truth[:, k])[0]), 3)}
              for k, n in enumerate(objectives)}
    print(json.dumps({"args": {k: str(v) for k, v in vars(a).items()}, "pretrain_s": round(pre_s),
                      "finetune_s": round(fit_s), "scores": scores}, indent=1))


if __name__ == "__main__":
    main()
