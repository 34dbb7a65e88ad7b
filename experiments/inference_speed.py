"""Sampling throughput of the regression model: NB201 architectures per second on this CPU.

    python experiments/inference_speed.py

Weights are random (speed does not depend on them); 64 samples × 5 objectives per architecture, as
the issue's target states (≥ 50 architectures/s on 2 cores). ``--smoke`` runs the whole script in
seconds (8 architectures, 8 samples, batches of 4 and 8, a tokenizer of NB201 texts only), as its test
does.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from nasrlm.data import Objective
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.tokenizers import OnnxTokenizer
from search_spaces import NasBench201

VARIANTS = {  # the sizes of nasrlm.rlm.recipes.SIZES compared
    "compact (the RLMSampler's)": "compact",
    "small (`nasrlm pretrain`'s default)": "small",
    "lean (`small`, 1 decoder layer, d_ff 256; `nasrlm train`'s default)": "lean",
}
NAMES = ("acc", "pixel3", "eyeriss", "gold_6226", "1080ti_1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--smoke", action="store_true",
                        help="8 architectures, 8 samples, batches 4 and 8: checks the script runs")
    args = parser.parse_args()
    archs, samples, batches, spaces = 64, 64, (16, 64), None
    if args.smoke:  # a tokenizer of NB201 texts only: every registered space's takes ~20 s to learn
        archs, samples, batches, spaces = 8, 8, (4, 8), ["nb201"]
    torch.set_num_threads(args.threads)
    space = NasBench201()
    texts = [space.to_text(space.parse(i)) for i in space.sample_ids(archs, seed=5)]
    tokenizer = OnnxTokenizer.train_on_spaces(spaces, seed=0)
    objectives = [Objective(n, "", n, "random", False) for n in NAMES]
    print(f"| model | batch | archs/s ({samples} samples × {len(NAMES)} objectives) |\n|---|---|---|")
    for name, size in VARIANTS.items():
        predictor = RLMPredictor.from_scratch(objectives, size=size, tokenizer=tokenizer)
        predictor.lm.normalizers = {n: Normalizer.fit(np.arange(1.0, 100.0)) for n in NAMES}
        predictor.lm.decode_order = NAMES
        for batch in batches:
            predictor.sample(texts[:batch], num_samples=samples, batch_size=batch)  # warm-up
            start = time.perf_counter()
            predictor.sample(texts, num_samples=samples, batch_size=batch)
            print(f"| {name} | {batch} | {len(texts) / (time.perf_counter() - start):.1f} |")


if __name__ == "__main__":
    main()
