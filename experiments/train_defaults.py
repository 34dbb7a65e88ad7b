"""What a user gets from ``nasrlm train`` with its defaults, per model size: rank quality, time, speed.

    python experiments/train_defaults.py --data-dir ../shared/data --objective eyeriss --seeds 0,1

Runs the command line as a user would: ``nasrlm data`` writes the table (NB201 unless ``--space``), each
seed's ``default_rng(seed).permutation`` of it labels its first N rows and tests on the next 5,000 (the
split of ``transfer_benchmark.py``), ``nasrlm train --data train.csv -o M --size S`` trains, and ``nasrlm
eval M --data test.csv`` ranks the test rows (median of ``--samples`` samples, Kendall τ). With ``--base
BASE[,BASE...]`` it fine-tunes each base instead (``nasrlm train --base BASE``; the base has its own
size); ``--train-options`` adds options to every ``nasrlm train`` (an ablation as a user runs it).
Inference speed per size: ``experiments/inference_speed.py``. ``--smoke`` runs the whole script in
seconds (20 labels, 40 test rows, 2 epochs, fine-tuning an untrained tiny base whose tokenizer knows the
space's texts only: from scratch, ``nasrlm train`` first learns every registered space's tokenizer, ~20
s), as its test does.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from nasrlm.data import BenchmarkTable


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--space", default="nb201", help="a space with published tables (nb201, nb101, ...)")
    p.add_argument("--objective", default="acc")
    p.add_argument("--sizes", default="small,lean,compact")
    p.add_argument("--labels", default="100,1000")
    p.add_argument("--seeds", default="0")
    p.add_argument("--test", type=int, default=5000)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--base", "--init", dest="base",  # --init: its old name, in commands on the results page
                   help="comma-separated base model directories to fine-tune instead of --sizes")
    p.add_argument("--train-options", default="", help="more options of nasrlm train, as one string (e.g. "
                   "'--prior none --equivalents 3': the ablations as a user runs them)")
    p.add_argument("--smoke", action="store_true", help="20 labels, 40 test rows, 2 epochs of a tiny base: "
                   "checks the script runs")
    a = p.parse_args()
    train_options = shlex.split(a.train_options)
    if a.smoke:
        a.labels, a.test, a.samples, a.seeds = "20", 40, 4, "0"
        train_options += ["--epochs", "2"]
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        subprocess.run(["nasrlm", "data", a.space, "--objectives", a.objective, "--data-dir", a.data_dir,
                        "-o", str(work / "all.csv")], check=True)
        table = BenchmarkTable.read_csv(work / "all.csv")
        if a.base:
            models = {b: ["--base", b] for b in a.base.split(",")}
        elif a.smoke:
            models = {"tiny, untrained": ["--base", str(smoke_base(work / "base", a.space))]}
        else:
            models = {s: ["--size", s] for s in a.sizes.split(",")}
        print(f"| {'base' if a.base or a.smoke else 'size'} | labels | seed | τ | central-80% coverage | "
              "train s |\n|---|---|---|---|---|---|", flush=True)
        for seed in (int(s) for s in a.seeds.split(",")):
            order = np.random.default_rng(seed).permutation(len(table.ids))
            for n in (int(x) for x in a.labels.split(",")):
                train, test = order[:n], order[n : n + a.test]
                subset(table, train).to_csv(work / "train.csv")
                subset(table, test).to_csv(work / "test.csv")
                for k, (size, how) in enumerate(models.items()):
                    out = work / f"{k}-{n}-{seed}"
                    start = time.perf_counter()
                    subprocess.run(["nasrlm", "train", "--data", str(work / "train.csv"), "-o", str(out),
                                    *how, "--seed", str(seed), "--threads", str(a.threads), "-q",
                                    *train_options],
                                   check=True)
                    seconds = time.perf_counter() - start
                    scores = subprocess.run(["nasrlm", "eval", str(out), "--data", str(work / "test.csv"),
                                             "--samples", str(a.samples), "--seed", str(seed), "-q"],
                                            check=True, capture_output=True, text=True).stdout
                    measured = json.loads(scores)[a.objective]
                    tau, coverage = measured["kendall"], measured["coverage80"]
                    print(f"| {size} | {n} | {seed} | {tau:.3f} | {coverage:.2f} | {seconds:.0f} |",
                          flush=True)


def smoke_base(path: Path, space: str) -> Path:
    """An untrained tiny base model whose tokenizer learned ``space``'s texts only."""
    from nasrlm.rlm.predictor import RLMPredictor
    from nasrlm.rlm.tokenizers import OnnxTokenizer

    RLMPredictor.from_scratch([], size="tiny", tokenizer=OnnxTokenizer.train_on_spaces([space])).save(path)
    return path


def subset(table: BenchmarkTable, rows: np.ndarray) -> BenchmarkTable:
    return BenchmarkTable(table.space, [table.ids[i] for i in rows], table.objectives, table.values[rows])


if __name__ == "__main__":
    sys.exit(main())
