"""Sampling throughput of the regression model: NB201 architectures per second on this CPU.

    python experiments/inference_speed.py

Weights are random (speed does not depend on them); 64 samples × 5 objectives per architecture, as
the issue's target states (≥ 50 architectures/s on 2 cores).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from nasrlm.data import Objective
from nasrlm.normalize import Normalizer
from nasrlm.predictor import RLMPredictor
from nasrlm.presets import SIZES
from nasrlm.tokenizers import OnnxTokenizer
from search_spaces import NasBench201

VARIANTS = {
    "compact (the RLMSampler's)": SIZES["compact"],
    "small (`nasrlm pretrain`'s default)": SIZES["small"],
    "lean (`small`, 1 decoder layer, d_ff 256; `nasrlm train`'s default)": SIZES["lean"],
}
NAMES = ("acc", "pixel3", "eyeriss", "gold_6226", "1080ti_1")


def main() -> None:
    torch.set_num_threads(2)
    space = NasBench201()
    texts = [space.to_text(space.parse(i)) for i in space.sample_ids(64, seed=5)]
    tokenizer = OnnxTokenizer.train_on_spaces(seed=0)
    objectives = [Objective(n, "", n, "random", False) for n in NAMES]
    print("| model | batch | archs/s (64 samples × 5 objectives) |\n|---|---|---|")
    for name, options in VARIANTS.items():
        predictor = RLMPredictor.create(tokenizer, objectives, **options)
        predictor.normalizers = {n: Normalizer.fit(np.arange(1.0, 100.0)) for n in NAMES}
        predictor.decode_order = NAMES
        for batch in (16, 64):
            predictor.sample(texts[:batch], num_samples=64, batch_size=batch)  # warm-up
            start = time.perf_counter()
            predictor.sample(texts, num_samples=64, batch_size=batch)
            print(f"| {name} | {batch} | {len(texts) / (time.perf_counter() - start):.1f} |")


if __name__ == "__main__":
    main()
