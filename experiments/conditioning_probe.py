"""Does the RLM lean on the objectives decoded before? Each objective, conditioned on sampled vs true ones.

    python experiments/conditioning_probe.py --data-dir ../shared/data --seed 1

The decoder writes ``acc, pixel3, eyeriss, gold_6226, 1080ti_1`` in turn, each conditioned on the ones
before, trained with the true earlier values (teacher forcing) and used with its own samples of them.
Latencies on NB201 are near-linear in the same op counts (eyeriss exactly so), so a model can learn a
later latency from an earlier one instead of from the text. This probe fits ``rlm+prior`` as
``experiments/predictor_benchmark.py`` does (same split, pre-training and budget), then ranks the test
cells twice per objective: decoding everything (the normal path) and decoding that objective alone with
the true values of the objectives before it given. A large gap would mean the model reads later
objectives off the earlier ones, and its own predictions of those are too poor to carry them. (Measured:
no gap; experiments/README.md, "Predictor quality on NAS-Bench-201".) Like the benchmark, the time
budget makes results depend on load.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from predictor_benchmark import FREE, OBJECTIVES
from scipy import stats

from nasrlm.data import load_nb201
from nasrlm.free_labels import FREE_OBJECTIVES, texts_and_free_labels
from nasrlm.predictor import RLMPredictor
from nasrlm.presets import SIZES
from nasrlm.tokenizers import OnnxTokenizer
from nasrlm.training import TrainConfig
from search_spaces import NasBench201


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=1000, help="labelled training architectures")
    parser.add_argument("--test-size", type=int, default=2000)
    parser.add_argument("--pretrain", type=int, default=3000)
    parser.add_argument("--max-minutes", type=float, default=5.0, help="per training phase")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    space = NasBench201()
    table = load_nb201(OBJECTIVES, args.data_dir)
    order = np.random.default_rng(args.seed).permutation(len(table.ids))  # the benchmark's split
    test = order[: args.test_size]
    train = order[5000 : 5000 + args.n]  # the benchmark tests on 5,000: train on the same N cells
    tokenizer = OnnxTokenizer.train_on_spaces(seed=0)

    def described(ids: list[str]) -> tuple[list[str], np.ndarray]:
        return texts_and_free_labels(space, ids, progress=True)

    start = time.perf_counter()
    pre_texts, pre_free = described(space.sample_ids(args.pretrain, seed=1000 + args.seed))
    predictor = RLMPredictor.create(tokenizer, [*FREE_OBJECTIVES, *table.objectives], **SIZES["small"])
    torch.manual_seed(args.seed)
    predictor.fit(pre_texts, pre_free, FREE, TrainConfig(seed=args.seed, max_minutes=args.max_minutes))
    train_texts, train_free = described([table.ids[i] for i in train])
    predictor.fit(train_texts, np.hstack([train_free, table.values[train]]), (*FREE, *OBJECTIVES),
                  TrainConfig(seed=args.seed, max_minutes=args.max_minutes), prior_from=FREE)
    print(f"fitted in {time.perf_counter() - start:.0f} s; residual weights {predictor.residual_weights}")

    texts, free = described([table.ids[i] for i in test])
    truth = table.values[test]
    given_free = dict(zip(FREE, free.T, strict=True))
    everything = np.median(predictor.sample(texts, OBJECTIVES, given=given_free, num_samples=args.samples,
                                            seed=args.seed, progress=True), axis=1)
    residuals = predictor.prior.residuals(free, truth)  # what the decoder reads for a given objective

    def rank(pred: np.ndarray, k: int) -> str:
        if k == 0:
            return f"τ {stats.kendalltau(pred, truth[:, 0]).statistic:.3f}"
        return f"ρ {stats.spearmanr(pred, truth[:, k]).statistic:.3f}"

    print("\n| objective | decoded after its own samples | decoded after the true values |")
    print("|---|---|---|")
    for k, name in enumerate(OBJECTIVES):
        given = {**given_free, **{o: residuals[:, j] for j, o in enumerate(OBJECTIVES[:k])}}
        alone = np.median(predictor.sample(texts, (name,), given=given, num_samples=args.samples,
                                           seed=args.seed), axis=1)[:, 0]
        print(f"| {name} | {rank(everything[:, k], k)} | {rank(alone, k)} |", flush=True)


if __name__ == "__main__":
    main()
