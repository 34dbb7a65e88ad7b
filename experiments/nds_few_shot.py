"""How well few records of a published NDS ImageNet file rank the rest: ``nasrlm train`` from 16 or 64
records against the parameter count, the FLOPs, the shipped base zero-shot, and its parts alone.

    python experiments/nds_few_shot.py --data-dir ../shared/data --shots 16 --seeds 0,1,2,3,4 \
        --methods params,flops,zero-shot,train --results runs/nds.jsonl

The NDS paper's Table 4 setting (Radosavovic et al. 2019 ranked by the RLM paper's few-shot transfer) on the
files at hand: NDS' six ImageNet files (``nds_data/<Space>_in.json``; ``DARTS_fix-w-d`` is DARTS at fixed
width and depth, read by naming its file). Per file, records whose text is longer than the shipped base
reads (``max_input_tokens`` of its tokenizer's tokens) are left out and counted; each seed's
``default_rng(seed).permutation`` of the others labels its first N records (``--shots``) and ranks **all
the rest**: Kendall τ of each method's prediction with the recorded accuracy (``acc``: 100 − the last
epoch's top-1 error). Methods (``--methods``):

- ``params``, ``flops``: the record's parameter count / FLOPs (as NDS counted them), larger ranked better;
- ``zero-shot``: ``nasrlm predict --space S --arch ...`` with no model, the shipped base's
  ``accuracy_rank`` (median of ``--samples``), predicted once for every record and ranked on each test set;
- ``train``: ``nasrlm train --data train.csv`` with its defaults (the shipped base fine-tuned, the
  ``auto`` prior blended), then ``nasrlm eval`` on the rest, as a user runs them (its printed share of the
  language model is kept);
- ``lm-alone``: the same with ``--prior none``, the language model alone;
- ``prior-alone``: the prior ``nasrlm train`` blends, fitted alone on the same records
  (``FeaturePrior.fit(..., kind="auto")`` on the free and graph labels and the base's transfer forest's
  guess, the inputs ``fine_tune`` gives it, marked as it marks them: the free labels for ``auto``'s
  simplest line, the counts a latency adds up for a sum alone);
- ``others``: leave one space out, as the RLM paper's Table 4 does, in two steps: the shipped base's
  decoder fine-tuned (``nasrlm train --prior none``'s recipe, :data:`~nasrlm.rlm.recipes.ALONE_TUNE`, one
  decoder) on every record that fits of the *other spaces'* files (DARTS and DARTS_fix-w-d are one space),
  once per target space, then a copy of it on the N labelled records of the target, per seed; each decodes
  the cross-space ``accuracy_rank`` (a record's quantile of accuracy within its own file, or among the N)
  after reading the parameter count and MACs, as pre-training taught it; τ of the median of ``--samples``;
- ``others-zero-shot``: the first step's model alone, no record of the target (predicted once per file).

Each run's τ is appended to ``--results`` (JSON lines) as it ends, and runs already there are skipped: the
grid can be run in parts and printed whole (``--print-only``); the first steps of ``others`` are kept beside
it (``<results>-others/<space>``). The tables: per N, method × file, mean ±
std over seeds and the mean over files; the records left out; seconds per training. ``--smoke`` runs in
a minute or two (one file, 20 records, 8 shots, one seed, 2 epochs, 2 samples, one training).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import torch
from _common import machine
from scipy.stats import kendalltau

from nasrlm.data import BenchmarkTable, load_nds_json, load_table
from nasrlm.free_labels import texts_and_free_labels
from nasrlm.priors.transfer import ACCURACY_RANK
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.pretraining import quantiles
from nasrlm.rlm.recipes import fine_tune_recipe
from search_spaces import get_space

#: file name (as the results say it) -> (space, file in nds_data/); the five <Space>_in.json files are what
#: ``nasrlm data`` reads, the fix-w-d variant is read by naming it
FILES = {
    "DARTS": ("nds_darts_in", None),
    "DARTS_fix-w-d": ("nds_darts_in", "DARTS_fix-w-d_in.json"),
    "ENAS": ("nds_enas_in", None),
    "NASNet": ("nds_nasnet_in", None),
    "ResNeXt-A": ("nds_resnext-a_in", None),
    "ResNeXt-B": ("nds_resnext-b_in", None),
}
METHODS = ("params", "flops", "zero-shot", "prior-alone", "train", "lm-alone", "others", "others-zero-shot")
TRAINED = {"train": [], "lm-alone": ["--prior", "none"]}
COLUMNS = ["acc", "params_m", "flops_m"]
#: the command line, run by this interpreter (its environment, the venv not necessarily on PATH)
NASRLM = [sys.executable, "-m", "nasrlm"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--files", default=",".join(FILES), help=f"of {', '.join(FILES)}")
    p.add_argument("--shots", default="16,64", help="labelled records per file (the rest are ranked)")
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--methods", default=",".join(METHODS), help=f"of {', '.join(METHODS)}")
    p.add_argument("--samples", type=int, default=64, help="decoder samples per architecture (predict, eval)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of each nasrlm train")
    p.add_argument("--results", help="JSON lines: each run appended as it ends; runs already there skipped")
    p.add_argument("--print-only", action="store_true", help="print the tables of --results, run nothing")
    p.add_argument("--smoke", action="store_true", help="a minute or two: ResNeXt-A, 20 records of each "
                   "file, 8 shots, seed 0, 2 epochs, 2 samples; lm-alone left out (train's run with "
                   "--prior none)")
    a = p.parse_args()
    files, methods = a.files.split(","), a.methods.split(",")
    unknown = sorted(set(files) - set(FILES)) + sorted(set(methods) - set(METHODS))
    if unknown:
        raise SystemExit(f"unknown file or method {unknown[0]!r}; files: {', '.join(FILES)}; methods: "
                         f"{', '.join(METHODS)}")
    extra: list[str] = []
    if a.smoke:
        files, a.shots, a.seeds, a.samples = ["ResNeXt-A"], "8", "0", 2
        extra = ["--epochs", "2"]
        methods = [m for m in methods if m != "lm-alone"]  # one training is enough to smoke the script
    shots, seeds = [int(n) for n in a.shots.split(",")], [int(s) for s in a.seeds.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(a.results) if a.results else Path(scratch) / "results.jsonl"
        done = read_results(results)
        if not a.print_only:
            for name in files:
                run_file(name, a, shots, seeds, methods, extra, results, done, Path(scratch))
        print_tables(read_results(results), files, shots, seeds, methods)


# --- one file ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Records:
    """One file's records that the shipped base reads whole (texts within its input limit), in file order."""

    table: BenchmarkTable
    rows: np.ndarray  # of the table
    ids: list[str]
    texts: list[str]
    labels: np.ndarray  # free and graph labels
    values: np.ndarray  # COLUMNS
    left_out: int  # records longer than ``limit`` tokens
    tokens: tuple[int, int]  # the shortest and longest text of all, in tokens
    limit: int
    transfer: object  # the shipped base's transfer forest for this space (what train's prior reads)

    @property
    def acc(self) -> np.ndarray:
        return self.values[:, 0]


@cache
def read_records(name: str, data_dir: str, smoke: bool) -> Records:
    space_name, file = FILES[name]
    table = load_nds_json(Path(data_dir) / "nds_data" / file, objectives=COLUMNS) if file else \
        load_table(space_name, COLUMNS, data_dir=data_dir)
    rows = np.flatnonzero(~np.isnan(table.values).any(axis=1))
    if smoke:  # describe only the records a smoke run reads
        rows = np.sort(np.random.default_rng(0).permutation(rows)[:20])
    space = get_space(space_name)
    ids = [table.ids[i] for i in rows]
    texts, labels = texts_and_free_labels(space, ids, graph=True, progress=False)
    lengths, limit, transfer = token_lengths(space_name, texts)
    keep = np.flatnonzero(lengths <= limit)
    return Records(table, rows[keep], [ids[i] for i in keep], [texts[i] for i in keep], labels[keep],
                   table.values[rows[keep]], len(ids) - len(keep), (int(lengths.min()), int(lengths.max())),
                   limit, transfer)


def run_file(name: str, a: argparse.Namespace, shots: list[int], seeds: list[int], methods: list[str],
             extra: list[str], results: Path, done: dict, work: Path) -> None:
    space_name = FILES[name][0]
    r = read_records(name, a.data_dir, a.smoke)
    print(f"{name} ({space_name}): {len(r.ids) + r.left_out} records, {r.left_out} longer than {r.limit:,} "
          f"tokens left out ({r.tokens[0]}-{r.tokens[1]} tokens)", flush=True)
    append(results, done, {"file": name, "kind": "records", "records": len(r.ids) + r.left_out,
                           "left_out": r.left_out, "tokens": list(r.tokens), "limit": r.limit})
    acc, params, flops = r.values[:, 0], r.values[:, 1], r.values[:, 2]
    # the first step of ``others``, fitted (or read back from an earlier run) once for all the seeds
    first_step = cache(lambda: others_model(name, a, results.parent / f"{results.stem}-others"))
    fixed = {"params": params, "flops": flops}
    for method, predict in (("zero-shot", lambda: predict_zero_shot(space_name, r.ids, a.samples, a.threads)),
                            ("others-zero-shot", lambda: first_step().median(r.texts))):
        kept = done.get((name, method))
        if kept is not None and kept["ids"] == r.ids and kept["samples"] == a.samples:
            fixed[method] = np.array(kept["median"])  # an earlier run's: the same records, samples, seed
        elif method in methods and not all((name, n, s, method) in done for n in shots for s in seeds):
            start = time.perf_counter()
            fixed[method] = predict()
            print(f"  {method}: {len(r.ids)} records in {time.perf_counter() - start:.0f} s", flush=True)
            append(results, done, {"file": name, "kind": method, "ids": r.ids, "samples": a.samples,
                                   "median": fixed[method].tolist()})
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(len(r.ids))
        for n in shots:
            train, test = order[:n], order[n:]
            for method in methods:
                if (name, n, seed, method) in done:
                    continue
                record = {"file": name, "kind": "tau", "shots": n, "seed": seed, "method": method,
                          "test": len(test)}
                start = time.perf_counter()
                if method in fixed:
                    record["tau"] = tau(fixed[method][test], acc[test])
                elif method == "prior-alone":
                    record["tau"] = tau(prior_alone(r.labels, r.transfer, acc, train, test, seed), acc[test])
                    record["seconds"] = time.perf_counter() - start
                elif method == "others":
                    model = first_step().tuned([r.texts[i] for i in train], acc[train], seed)
                    record["tau"] = tau(model.median([r.texts[i] for i in test]), acc[test])
                    record["seconds"] = time.perf_counter() - start
                else:
                    record.update(train_and_eval(r.table, r.rows, train, test, seed, a,
                                                 [*TRAINED[method], *extra], work / f"{name}-{n}-{seed}"))
                append(results, done, record)
                print(f"  {name} @{n} seed {seed} {method}: τ {record['tau']:.3f}"
                      + (f" ({record['seconds']:.0f} s)" if "seconds" in record else "")
                      + (f"; share {record['share']}" if record.get("share") else ""), flush=True)


def token_lengths(space_name: str, texts: list[str]) -> tuple[np.ndarray, int, object]:
    """Each text's tokens under the shipped base's tokenizer, the most its model reads, and its transfer
    forest for this space (what ``nasrlm train``'s prior reads beside the graph labels)."""
    base = RLMPredictor.from_base("shipped", [], space=space_name)
    lengths = np.array([len(t) for t in base.lm.tokenizer.encode_batch(texts)])
    transfer = base.transfer.for_space(get_space(space_name)) if base.transfer is not None else None
    return lengths, base.lm.model.config.max_input_tokens, transfer


# --- leave one space out ----------------------------------------------------------------------------------
@dataclass
class RankReader:
    """The shipped base's language model fine-tuned to decode ``accuracy_rank`` (after reading the free
    labels it reads first), alone: no prior."""

    predictor: RLMPredictor
    samples: int
    threads: int
    max_epochs: int | None = None  # the recipe's otherwise (a smoke run: fewer)

    def fit(self, texts: list[str], acc: np.ndarray, seed: int) -> None:
        """Fine-tune on ``texts`` to decode each one's quantile of ``acc`` among them (pre-training's
        ``accuracy_rank``, which puts every file's accuracies on one scale)."""
        torch.set_num_threads(self.threads)
        recipe = fine_tune_recipe(alone=True, blend=False)
        # one decoder: the recipe's second from 300 rows would double a fit of the others' ~1,000 records
        config = recipe.config(len(texts), progress=False, seed=seed, members=1)
        if self.max_epochs is not None:
            config.max_epochs = min(config.max_epochs, self.max_epochs)
        self.predictor.fit(texts, quantiles(acc)[:, None], [ACCURACY_RANK.name], config,
                           refit_normalizers=False, reads=self.predictor.lm.reads_first)

    def tuned(self, texts: list[str], acc: np.ndarray, seed: int) -> RankReader:
        """A copy fine-tuned further on ``texts``, this one unchanged."""
        tuned = RankReader(self.predictor.clone(), self.samples, self.threads, self.max_epochs)
        tuned.fit(texts, acc, seed)
        return tuned

    def median(self, texts: list[str]) -> np.ndarray:
        samples = self.predictor.lm.sample(texts, (ACCURACY_RANK.name,), num_samples=self.samples, seed=0)
        return np.median(samples[..., 0], axis=1)


def others_model(name: str, a: argparse.Namespace, models: Path) -> RankReader:
    """The first step of ``others`` for ``name``'s space: fitted once per space (saved in ``models``)."""
    space_name = FILES[name][0]
    path = models / space_name
    epochs = 2 if a.smoke else None
    if path.is_dir():
        return RankReader(RLMPredictor.load(path), a.samples, a.threads, epochs)
    texts, acc = [], []
    for other, (other_space, _) in FILES.items():
        if other_space != space_name:
            r = read_records(other, a.data_dir, a.smoke)
            texts += r.texts
            acc.append(r.acc)
    start = time.perf_counter()
    reader = RankReader(RLMPredictor.zero_shot(space_name), a.samples, a.threads, epochs)
    reader.fit(texts, np.concatenate([quantiles(v) for v in acc]), seed=0)
    reader.predictor.save(path)
    print(f"  others for {space_name}: {len(texts)} records of {len(acc)} files in "
          f"{time.perf_counter() - start:.0f} s", flush=True)
    return reader


def nasrlm(args: list[str], threads: int) -> subprocess.CompletedProcess[str]:
    """``nasrlm ARGS`` on ``threads`` torch threads (``predict`` and ``eval`` have no ``--threads``; torch
    reads ``OMP_NUM_THREADS``); its error output, and a stop, where it fails."""
    run = subprocess.run([*NASRLM, *args], capture_output=True, text=True,
                         env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    if run.returncode:
        raise SystemExit(f"nasrlm {args[0]} failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return run


def predict_zero_shot(space_name: str, ids: list[str], samples: int, threads: int) -> np.ndarray:
    """The shipped base's median ``accuracy_rank`` of each of ``ids`` (``nasrlm predict``, no model)."""
    command = ["predict", "--space", space_name, "--samples", str(samples), "--seed", "0", "-q"]
    for i in ids:
        command += ["--arch", i]
    out = json.loads(nasrlm(command, threads).stdout)
    return np.array([next(iter(out[i].values()))["median"] for i in ids])


def prior_alone(labels: np.ndarray, transfer: object, acc: np.ndarray, train: np.ndarray, test: np.ndarray,
                seed: int) -> np.ndarray:
    """The ``auto`` feature prior on the free and graph labels (and the transfer forest's guess), fitted on
    ``train`` alone as ``nasrlm train`` fits it beside the model: its mean score for ``test``."""
    from nasrlm.free_labels import ALL_FREE_OBJECTIVES
    from nasrlm.priors.feature_prior import DEFAULT_PRIOR, FeaturePrior
    from nasrlm.priors.inputs import InputRoles
    from nasrlm.priors.transfer import TRANSFER_LABEL

    x, names = labels, [o.name for o in ALL_FREE_OBJECTIVES]
    if transfer is not None:
        x = np.column_stack([labels, transfer.predict(labels)])  # type: ignore[attr-defined]
        names.append(TRANSFER_LABEL)
    prior, _ = FeaturePrior.fit(x[train], acc[train, None], kind=DEFAULT_PRIOR, seed=seed,
                                **InputRoles.of(names).keywords())
    return prior.mean(x[test])[:, 0]


def train_and_eval(table: BenchmarkTable, rows: np.ndarray, train: np.ndarray, test: np.ndarray, seed: int,
                   a: argparse.Namespace, options: list[str], out: Path) -> dict:
    """``nasrlm train`` on the ``train`` records' accuracy, ``nasrlm eval`` on the ``test`` records: τ,
    seconds of the training, and the language model's share it printed."""
    out.mkdir(parents=True, exist_ok=True)
    for part, which in (("train", train), ("test", test)):
        chosen = rows[which]
        BenchmarkTable(table.space, [table.ids[i] for i in chosen], table.objectives[:1],
                       table.values[chosen][:, :1]).to_csv(out / f"{part}.csv")
    model = out / f"model-{'-'.join(options) or 'default'}"
    start = time.perf_counter()
    trained = nasrlm(["train", "--data", str(out / "train.csv"), "-o", str(model), "--seed", str(seed),
                      "--threads", str(a.threads), "-q", *options], a.threads)
    seconds = time.perf_counter() - start
    share = re.search(r"share of each prediction \(([^)]*)\): (.*)", trained.stderr)
    scores = nasrlm(["eval", str(model), "--data", str(out / "test.csv"), "--samples", str(a.samples),
                     "--seed", str(seed), "-q"], a.threads).stdout
    shutil.rmtree(model)
    measured = json.loads(scores)["acc"]
    return {"tau": measured["kendall"] if measured["kendall"] is not None else float("nan"),
            "coverage80": measured["coverage80"], "seconds": seconds,
            "share": f"{share.group(2)} ({share.group(1)})" if share else None}


def tau(predicted: np.ndarray, truth: np.ndarray) -> float:
    return float(kendalltau(predicted, truth).statistic)


# --- results ----------------------------------------------------------------------------------------------
def read_results(path: Path) -> dict:
    """Runs already in ``path``: (file, shots, seed, method) -> record, (file, "records") -> the records
    read, and (file, "zero-shot") and (file, "others-zero-shot") -> the prediction of each."""
    done: dict = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                add(done, json.loads(line))
    return done


def add(done: dict, record: dict) -> None:
    key = ((record["file"], record["kind"]) if record["kind"] != "tau" else
           (record["file"], record["shots"], record["seed"], record["method"]))
    done[key] = record


def append(path: Path, done: dict, record: dict) -> None:
    add(done, record)
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")


def print_tables(done: dict, files: list[str], shots: list[int], seeds: list[int], methods: list[str]
                 ) -> None:
    print(f"\nseeds {','.join(map(str, seeds))}; machine {machine_line()}\n")
    print("| file | records | left out (> limit tokens) | tokens |\n|---|---|---|---|")
    for name in files:
        r = done.get((name, "records"))
        if r:
            print(f"| {name} | {r['records']} | {r['left_out']} (> {r['limit']:,}) | "
                  f"{r['tokens'][0]}-{r['tokens'][1]} |")
    for n in shots:
        print(f"\n@{n} records: Kendall τ on the rest, mean ± std over the seeds run (runs)\n")
        print("| method | " + " | ".join(files) + " | mean over files |")
        print("|---|" + "---|" * (len(files) + 1))
        for method in methods:
            cells, means = [], []
            for name in files:
                taus = [done[(name, n, s, method)]["tau"] for s in seeds if (name, n, s, method) in done]
                if taus:
                    cells.append(f"{np.mean(taus):.3f} ± {np.std(taus):.3f} ({len(taus)})")
                    means.append(np.mean(taus))
                else:
                    cells.append("–")
            mean = f"{np.mean(means):.3f}" if len(means) == len(files) else "–"
            print(f"| {method} | " + " | ".join(cells) + f" | {mean} |")
        seconds = defaultdict(list)
        for (name, m, _s, method), r in ((k, v) for k, v in done.items() if len(k) == 4):
            if m == n and name in files and "seconds" in r and method in TRAINED:
                seconds[method].append(r["seconds"])
        for method, s in seconds.items():
            print(f"\n{method} @{n}: {np.min(s):.0f}-{np.max(s):.0f} s per training (median "
                  f"{np.median(s):.0f}, {len(s)} trainings)")
        shares = [f"{name} seed {s}: {done[(name, n, s, 'train')]['share']}" for name in files for s in seeds
                  if (name, n, s, "train") in done and done[(name, n, s, "train")].get("share")]
        if shares:
            print("\nthe language model's share in `train`: " + "; ".join(shares))


def machine_line() -> str:
    return f"{machine()}, {os.cpu_count()} cores"


if __name__ == "__main__":
    main()
