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
  guess, the inputs ``fine_tune`` gives it, the free labels marked for ``auto``'s simplest line).

Each run's τ is appended to ``--results`` (JSON lines) as it ends, and runs already there are skipped: the
grid can be run in parts and printed whole (``--print-only``). The tables: per N, method × file, mean ±
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
from pathlib import Path

import numpy as np
from _common import machine
from scipy.stats import kendalltau

from nasrlm.data import BenchmarkTable, load_nds_json, load_table
from nasrlm.free_labels import texts_and_free_labels
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
METHODS = ("params", "flops", "zero-shot", "prior-alone", "train", "lm-alone")
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
    p.add_argument("--smoke", action="store_true", help="a minute or two: ResNeXt-A, 20 records, 8 shots, "
                   "seed 0, 2 epochs, 2 samples; lm-alone left out (train's run with --prior none)")
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
def run_file(name: str, a: argparse.Namespace, shots: list[int], seeds: list[int], methods: list[str],
             extra: list[str], results: Path, done: dict, work: Path) -> None:
    space_name, file = FILES[name]
    table = load_nds_json(Path(a.data_dir) / "nds_data" / file, objectives=COLUMNS) if file else \
        load_table(space_name, COLUMNS, data_dir=a.data_dir)
    rows = np.flatnonzero(~np.isnan(table.values).any(axis=1))
    if a.smoke:  # describe only the records a smoke run reads
        rows = np.sort(np.random.default_rng(0).permutation(rows)[:20])
    space = get_space(space_name)
    ids = [table.ids[i] for i in rows]
    texts, labels = texts_and_free_labels(space, ids, graph=True, progress=False)
    lengths, limit, transfer = token_lengths(space_name, texts)
    fits = lengths <= limit
    left_out = int((~fits).sum())
    print(f"{name} ({space_name}): {len(ids)} records, {left_out} longer than {limit:,} tokens left out "
          f"({lengths.min()}-{lengths.max()} tokens)", flush=True)
    append(results, done, {"file": name, "kind": "records", "records": len(ids), "left_out": left_out,
                           "tokens": [int(lengths.min()), int(lengths.max())], "limit": limit})
    keep = np.flatnonzero(fits)
    ids, labels = [ids[i] for i in keep], labels[keep]
    values = table.values[rows[keep]]
    acc, params, flops = values[:, 0], values[:, 1], values[:, 2]
    zero_shot, kept = None, done.get((name, "zero-shot"))
    if kept is not None and kept["ids"] == ids and kept["samples"] == a.samples:
        zero_shot = np.array(kept["median"])  # predicted by an earlier run: the same records, samples, seed
    elif "zero-shot" in methods and not all((name, n, s, "zero-shot") in done for n in shots for s in seeds):
        start = time.perf_counter()
        zero_shot = predict_zero_shot(space_name, ids, a.samples, a.threads)
        print(f"  zero-shot: {len(ids)} records in {time.perf_counter() - start:.0f} s", flush=True)
        append(results, done, {"file": name, "kind": "zero-shot", "ids": ids, "samples": a.samples,
                               "median": zero_shot.tolist()})
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(len(ids))
        for n in shots:
            train, test = order[:n], order[n:]
            fixed = {"params": params, "flops": flops, "zero-shot": zero_shot}
            for method in methods:
                if (name, n, seed, method) in done:
                    continue
                record = {"file": name, "kind": "tau", "shots": n, "seed": seed, "method": method,
                          "test": len(test)}
                if method in fixed:
                    record["tau"] = tau(fixed[method][test], acc[test])
                elif method == "prior-alone":
                    start = time.perf_counter()
                    record["tau"] = tau(prior_alone(labels, transfer, acc, train, test, seed), acc[test])
                    record["seconds"] = time.perf_counter() - start
                else:
                    record.update(train_and_eval(table, rows[keep], train, test, seed, a,
                                                 [*TRAINED[method], *extra], work / f"{name}-{n}-{seed}"))
                append(results, done, record)
                print(f"  {name} @{n} seed {seed} {method}: τ {record['tau']:.3f}"
                      + (f" ({record['seconds']:.0f} s)" if "seconds" in record else "")
                      + (f"; share {record['share']}" if record.get("share") else ""), flush=True)


def token_lengths(space_name: str, texts: list[str]) -> tuple[np.ndarray, int, object]:
    """Each text's tokens under the shipped base's tokenizer, the most its model reads, and its transfer
    forest for this space (what ``nasrlm train``'s prior reads beside the graph labels)."""
    from nasrlm.rlm.predictor import RLMPredictor

    base = RLMPredictor.from_base("shipped", [], space=space_name)
    lengths = np.array([len(t) for t in base.lm.tokenizer.encode_batch(texts)])
    transfer = base.transfer.for_space(get_space(space_name)) if base.transfer is not None else None
    return lengths, base.lm.model.config.max_input_tokens, transfer


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
    from nasrlm.free_labels import ALL_FREE_OBJECTIVES, FREE_LABEL_NAMES
    from nasrlm.priors.feature_prior import DEFAULT_PRIOR, FeaturePrior

    x, line = labels, np.ones(labels.shape[1], dtype=bool)
    free = np.array([o.name in FREE_LABEL_NAMES for o in ALL_FREE_OBJECTIVES])
    if transfer is not None:
        x = np.column_stack([labels, transfer.predict(labels)])  # type: ignore[attr-defined]
        line, free = np.append(line, False), np.append(free, False)  # no line follows the transfer's guess
    prior, _ = FeaturePrior.fit(x[train], acc[train, None], kind=DEFAULT_PRIOR, seed=seed, line_inputs=line,
                                free_inputs=free)
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
    read, and (file, "zero-shot") -> the shipped base's prediction of each."""
    done: dict = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                add(done, json.loads(line))
    return done


def add(done: dict, record: dict) -> None:
    key = ((record["file"], record["kind"]) if record["kind"] in ("records", "zero-shot") else
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
