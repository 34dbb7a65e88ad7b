"""Every benchmark script without a test of its own, run in its ``--smoke`` configuration on the published
tables: it exits 0 and prints its tables, whose numbers lie where such numbers must (a Kendall τ in
[-1, 1], a hypervolume ratio in [0, 1], a positive speed). Not the published numbers: those come from
the scripts' default runs (experiments/README.md)."""

from __future__ import annotations

import ast
import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nasrlm._processes import usable_cores

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"
#: the scripts whose smoke runs have a test module of their own (tests/experiments/test_<script>.py)
OWN_TESTS = {"search_benchmark.py", "transfer_benchmark.py", "worker_benchmark.py"}


# --- reading a script's output ------------------------------------------------------------------------
def table(stdout: str, header: str) -> list[list[str]]:
    """The body rows (stripped cells) of the markdown table whose header row starts with ``header``."""
    lines = stdout.splitlines()
    start = next((k for k, line in enumerate(lines) if line.startswith(header)), None)
    assert start is not None, f"no table {header!r} in:\n{stdout}"
    assert set(lines[start + 1]) <= set("|-: "), lines[start + 1]  # the separator row
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def number(cell: str) -> float:
    """The first number of a cell: ``0.512 ± 0.031`` -> 0.512, ``1,024 → 685`` -> 1024."""
    return float(cell.split("±")[0].split()[0].replace(",", ""))


def within(value: float, low: float, high: float) -> bool:
    return math.isfinite(value) and low <= value <= high


def tau(value: float) -> bool:
    """A rank correlation (Kendall τ or Spearman ρ)."""
    return within(value, -1.0, 1.0)


def fraction(value: float) -> bool:
    """A hypervolume ratio, a recall, a share."""
    return within(value, 0.0, 1.0)


def positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


# --- what each script is run with and what its output must hold -------------------------------------
@dataclass
class Smoke:
    """``options`` after ``--smoke`` (``{data}``: the data directory, ``{tmp}``: a scratch directory);
    ``prepare`` builds inputs in the scratch directory first; ``check`` reads the output."""

    check: Callable[[str], None]
    options: list[str] = field(default_factory=list)
    prepare: Callable[[Path, Path], None] | None = None


def check_acquisition_probe(out: str) -> None:
    rows = table(out, "| surrogate tau | spread | policy | HV ratio @20 | recall |")
    assert {(r[0], r[2]) for r in rows} == {(t, p) for t in ("1", "0.55/1", "prior") for p in (
        "ehvi10-pool2000", "ehvi10-pool2000-refstartup", "ehvi10-pool2000-refpredicted", "ehvi10-all",
        "ehvi1-all", "ehvi5-all", "thompson10-all")}
    assert len(rows) == 21
    for r in rows:
        assert fraction(number(r[3])) and fraction(number(r[4])), r


def check_candidate_pool_ceiling(out: str) -> None:
    rows = table(out, "| random draws | distinct cells |")
    assert [number(r[0]) for r in rows] == [100, 400]
    for r in rows:
        assert 1 <= number(r[1]) <= number(r[0]), r  # distinct cells: at most one per draw
        per_seed = [float(x) for x in r[2].split("(")[1].rstrip(")").split(",")]
        assert len(per_seed) == 2 and all(fraction(x) for x in per_seed), r
        found, front = r[3].split(" of ")
        assert 0 <= float(found) <= int(front), r
    # each seed's 400 draws begin with its 100: their front's hypervolume is at least as large
    assert number(rows[1][2]) >= number(rows[0][2])


def check_label_speed(out: str) -> None:
    [row] = table(out, "| space | text, 1 process |")
    assert row[0] == "nb201"
    assert all(cell.endswith("/s") and positive(number(cell.removesuffix("/s"))) for cell in row[1:]), row


def check_constraint_benchmark(out: str) -> None:
    rows = table(out, "| sampler | regret @6 (feasible) | regret @12 (feasible) | seconds per run |")
    assert [r[0] for r in rows] == ["rlm", "tpe"]
    for r in rows:
        for cell in r[1:3]:
            share = cell.split("(")[1].split("%")[0]
            assert within(number(share), 0, 100), r
            assert cell.startswith("none found") or number(cell.split(" ± ")[0]) >= 0, r
    assert "architectures meet it; the best of them" in out


def check_warm_start_benchmark(out: str) -> None:
    rows = table(out, "| sampler | HV ratio @6 | HV ratio @12 | seconds per run |")
    assert [r[0] for r in rows] == ["rlm-warm", "tpe-warm"]
    assert all(fraction(number(cell)) for r in rows for cell in r[1:3]), rows
    assert "(20 TPE evaluations) to acc,eyeriss" in out
    assert "the trials of 2 runs written to " in out  # --save-trials: one per sampler and seed


def check_export_benchmark(out: str) -> None:
    rows = dict(table(out, "| quantity | value |"))
    assert number(rows["architectures exported"]) == 20
    for name, value in rows.items():
        if "/s" in name:
            assert positive(number(value)), (name, value)
    latency = rows["measured median latency: min / median / max (ms)"]
    low, median, high = (number(x) for x in latency.split(" / "))
    assert 0 < low <= median <= high
    median, low, high = (number(x) for x in rows["canonical text: median / min / max"].split(" / "))
    assert 0 < low <= median <= high


def check_inference_speed(out: str) -> None:
    rows = table(out, "| model | batch | archs/s (8 samples × 5 objectives) |")
    assert len(rows) == 6 and {r[1] for r in rows} == {"4", "8"}
    assert len({r[0] for r in rows}) == 3
    assert all(positive(number(r[2])) for r in rows), rows


def check_predictor_benchmark(out: str) -> None:
    rows = table(out, "| method | N | acc Kendall τ |")
    methods = ("rlm", "rlm+pre", "rlm+prior", "mse-head", "gbdt")
    assert [(r[0], r[1]) for r in rows] == [(m, "40") for m in methods]
    for r in rows:
        assert len(r) == 9 and all(tau(number(c)) for c in r[2:8]), r
        assert positive(number(r[8])), r  # seconds
    proxies = table(out, "| zero-cost proxy (725 cells) |")
    assert [r[0] for r in proxies] == ["zc_synflow", "zc_nwot", "zc_jacov", "zc_snip", "zc_grad_norm"]
    for r in proxies:  # not smoke-sized: every published proxy ranks accuracy better than chance
        assert 0 < number(r[1]) <= 1 and 0 < number(r[2]) <= 1, r


def check_front_twins(out: str) -> None:
    rows = table(out, "| cell | values | twins |")
    # acc × samsung_a50: the true front's cells inside the reference box, by latency, and how many cells share
    # each one's operations over all edges and over the live ones (a wrong live-edge count moves them)
    assert [int(r[2]) for r in rows] == [18, 9, 48, 20, 5, 12, 60], rows
    assert [number(r[1].strip("[")) for r in rows] == [90.8, 90.83, 91.045, 92.097, 92.49, 93.397, 93.42]
    for r in rows:
        assert all(1 <= int(n) <= int(r[2]) for n in r[4].strip("[]").split(", ")), r
        assert fraction(number(r[5])), r
    summary = next(line for line in out.splitlines() if line.startswith("HV shares only one cell holds"))
    largest, three, every = (float(w.rstrip(",")) for w in summary.split() if w[0].isdigit())
    assert largest == pytest.approx(0.120, abs=0.001) and three == pytest.approx(0.267, abs=0.001), summary


def check_sampler_probe(out: str) -> None:
    rows = table(out, "| trials | acc τ | acc in 50 % |")
    assert [r[0] for r in rows] == ["4", "8"]  # a refit after the start-up trials and after 4 proposals
    for r in rows:
        # per objective: τ, in 50 %, τ among its best quarter, τ of the prior alone, τ weighted
        cells = [number(c) for c in r[1:11]]
        assert all(tau(c) for c in cells) and fraction(cells[1]) and fraction(cells[6]), r
    hv = next(line for line in out.splitlines() if line.startswith("HV ratio @12: "))
    assert fraction(float(hv.split(": ")[1].split(";")[0]))


def check_sampler_overhead(out: str) -> None:
    rows = table(out, "| device | s per evaluation |")
    assert len(rows) == 1 and rows[0][0] == "cpu", rows
    per_evaluation, *phases = (number(c) for c in rows[0][1:])
    assert positive(per_evaluation) and all(math.isfinite(s) and s >= 0 for s in phases[:3]), rows
    assert sum(phases) == pytest.approx(per_evaluation * 12, abs=0.5)  # the phases make up the wall time
    assert phases[0] > 0 and phases[1] > 0 and phases[2] > 0  # it described, fitted and predicted
    assert "12 evaluations" in out and " fits; " in out


def check_tokenizer_stats(out: str) -> None:
    rows = table(out, "| configuration | train archs |")
    assert [r[0] for r in rows] == ["**default**: bpe, len 256", "bpe, len 16", "unigram, len 16"]
    for r in rows:
        asked, got = (number(x) for x in r[2].split("→"))
        median, mean, most = number(r[3]), number(r[4]), number(r[5])
        assert 0 < got <= asked and 0 < median <= most and 0 < mean <= most and number(r[6]) > 1, r
    spaces = table(out, "| space | characters (median) |")
    assert [r[0] for r in spaces] == ["`nb201`"] and 0 < number(spaces[0][2]) <= number(spaces[0][3])


def check_train_defaults(out: str) -> None:
    rows = table(out, "| base | labels | seed | τ | central-80% coverage | train s |")
    assert [r[:3] for r in rows] == [["tiny, untrained", "20", "0"]]
    assert tau(number(rows[0][3])) and 0 <= number(rows[0][4]) <= 1 and number(rows[0][5]) >= 0


def check_calibration(out: str) -> None:
    rows = table(out, "| task | N | temperature | central-80% coverage | rank correlation |")
    temperatures = ["1", "1.5", "2", "1, calibrated"]
    assert [(r[0], r[1], r[2]) for r in rows] == [*(("nb201 acc", "10", t) for t in temperatures),
                                                  *(("nb201 pixel2", "20", t) for t in temperatures)]
    for r in rows:
        assert 0 <= number(r[3]) <= 1 and tau(number(r[4])), r
    decoded, calibrated = (rows[k] for k in (0, 3))  # calibration widens the samples, never moves the median
    assert number(calibrated[4]) == number(decoded[4])


def check_base_reading(out: str) -> None:
    rows = table(out, "| base | graph labels | median ρ, decoded vs true | worst |")
    assert len(rows) == 1 and number(rows[0][1]) > 10 and tau(number(rows[0][2])) and tau(number(rows[0][3]))
    rows = table(out, "| nb201 accuracy from 20 labels, τ on the other 40 | forest | ridge on ranks |")
    assert [r[0].split("'s")[0] != r[0] for r in rows] == [True, False]  # the base's row, then the truth's
    assert all(tau(number(cell)) for r in rows for cell in r[1:])


def check_lm_alone(out: str) -> None:
    rows = table(out, "| N | τ (mean of samples) | τ (median) |")
    assert [r[0] for r in rows] == ["N=0", "N=20"]
    for r in rows:
        assert tau(number(r[1].split("±")[0])) and tau(number(r[2])), r
    assert "acc N=20 seed 0 structure" in out and "archs/s decoded" in out


def check_prior_ranking(out: str) -> None:
    rows = table(out, "| objective | labels | prior | τ | τ, best quarter | fit s |")
    kinds = ("forest", "trend-forest", "gp")
    assert {(r[1], r[2]) for r in rows} == {(n, k) for n in ("10", "30") for k in kinds}
    for r in rows:
        assert r[0] == "acc" and tau(number(r[3])) and tau(number(r[4])) and number(r[5]) >= 0, r
    assert number(next(r[3] for r in rows if r[1:3] == ["30", "gp"])) > 0.3  # 30 labels rank accuracy


def check_nds_few_shot(out: str) -> None:
    [records] = table(out, "| file | records | left out")
    assert records[0] == "ResNeXt-A" and number(records[1]) == 20 and number(records[2]) == 0, records
    rows = table(out, "| method | ResNeXt-A | mean over files |")
    assert [r[0] for r in rows] == ["params", "flops", "zero-shot", "prior-alone", "train", "others",
                                    "others-zero-shot"]
    for r in rows:
        assert tau(number(r[1])) and r[1].endswith("(1)") and number(r[2]) == number(r[1]), r
    assert "train @8: " in out and "the language model's share in `train`" in out


def check_replay_benchmark(out: str) -> None:
    rows = table(out, "| seed | setting (kernels got) |")
    assert [r[:1] + [r[1].split()[0]] for r in rows] == [["0", "own:1"], ["0", "own:2"]]
    for r in rows:
        assert fraction(number(r[2])) and r[3] == "8 of 8", r  # the same trials with two torch threads
    assert "2 of 2 runs replay the reference's trials" in out


def check_train_ranking(out: str) -> None:
    cells = [line for line in out.splitlines() if line[:2].strip().isdigit()]
    assert len(cells) == 3, out
    for line in cells:
        here, cifar = (float(part.split("%")[0].split()[-1]) for part in line.split(" % ")[:2])
        assert within(here, 0, 100) and within(cifar, 0, 100), line
    summary = next(line for line in out.splitlines() if line.startswith("Spearman "))
    assert tau(float(summary.split()[1])) and "over 3 cells" in summary


DATA = ["--data-dir", "{data}"]
SMOKES: dict[str, Smoke] = {
    "acquisition_probe.py": Smoke(check_acquisition_probe, DATA),
    "candidate_pool_ceiling.py": Smoke(check_candidate_pool_ceiling, DATA),
    "constraint_benchmark.py": Smoke(check_constraint_benchmark, [*DATA, "--percentile", "50"]),
    "calibration.py": Smoke(check_calibration, [*DATA, "--threads", "1"]),
    "export_benchmark.py": Smoke(check_export_benchmark),
    "front_twins.py": Smoke(check_front_twins, DATA),
    "inference_speed.py": Smoke(check_inference_speed, ["--threads", "1"]),
    "label_speed.py": Smoke(check_label_speed),
    "base_reading.py": Smoke(check_base_reading, [*DATA, "--threads", "1"]),
    "lm_alone.py": Smoke(check_lm_alone, [*DATA, "--threads", "1", "--freeze-encoder"]),
    "nds_few_shot.py": Smoke(check_nds_few_shot, [*DATA, "--threads", "1"]),
    "predictor_benchmark.py": Smoke(check_predictor_benchmark, [*DATA, "--threads", "1"]),
    "prior_ranking.py": Smoke(check_prior_ranking, DATA),
    "replay_benchmark.py": Smoke(check_replay_benchmark, DATA),
    "sampler_overhead.py": Smoke(check_sampler_overhead, DATA),
    "sampler_probe.py": Smoke(check_sampler_probe, [*DATA, "--threads", "1"]),
    "tokenizer_stats.py": Smoke(check_tokenizer_stats),
    "warm_start_benchmark.py": Smoke(check_warm_start_benchmark, [*DATA, "--save-trials", "{tmp}/t.json"]),
    "train_defaults.py": Smoke(check_train_defaults, [*DATA, "--threads", "1"]),
    "train_ranking.py": Smoke(check_train_ranking, [*DATA, "--threads", "1"]),
}


def _smoke_run(script: str, data_dir: Path | None, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``experiments/SCRIPT --smoke`` with its options, its inputs prepared in ``tmp_path`` first."""
    smoke = SMOKES[script]
    if smoke.prepare is not None:
        smoke.prepare(data_dir, tmp_path)
    options = [o.format(data=data_dir, tmp=tmp_path) for o in smoke.options]
    # cold: every script describes, in one process (the runs go side by side, one per core)
    env = {**os.environ, "NASRLM_CACHE": str(tmp_path / "label-cache"), "NASRLM_JOBS": "1"}
    return subprocess.run([sys.executable, f"experiments/{script}", "--smoke", *options], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env=env)


#: the scripts that read the published tables (their tests skip without them)
NEEDS_DATA = {name for name, smoke in SMOKES.items() if "{data}" in smoke.options}


@pytest.fixture(scope="module")
def smoke_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[Callable[[str, Path | None], Future[subprocess.CompletedProcess[str]]]]:
    """Start a script's smoke run (once) on a pool of one per core, and with it every other run this session
    selected that can start: each test starts its own and then the others before waiting for its own, so
    they run side by side (most are a single process importing torch and fitting something small)."""
    selected = [item.callspec.params["script"] for item in request.session.items
                if item.originalname == "test_smoke_run_prints_its_tables"]
    pool = ThreadPoolExecutor(max_workers=usable_cores())
    started: dict[str, Future[subprocess.CompletedProcess[str]]] = {}

    def submit(script: str, data_dir: Path | None) -> None:
        if script not in started:
            started[script] = pool.submit(_smoke_run, script, data_dir, tmp_path_factory.mktemp(script))

    def start(script: str, data_dir: Path | None) -> Future[subprocess.CompletedProcess[str]]:
        submit(script, data_dir)
        for other in selected:  # those needing data only where it is; the others without it, as alone
            if other not in NEEDS_DATA:
                submit(other, None)
            elif data_dir is not None:
                submit(other, data_dir)
        return started[script]

    yield start
    pool.shutdown(cancel_futures=True)


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SMOKES))
def test_smoke_run_prints_its_tables(script: str, smoke_runs, request: pytest.FixtureRequest) -> None:
    # only the scripts that read the published tables skip without them
    data_dir = request.getfixturevalue("data_dir") if script in NEEDS_DATA else None
    run = smoke_runs(script, data_dir).result()
    assert run.returncode == 0, run.stderr[-2000:]
    SMOKES[script].check(run.stdout)


# --- what every script keeps to (issue 24) ------------------------------------------------------------
SCRIPTS = sorted(p.name for p in EXPERIMENTS.glob("*.py") if not p.name.startswith("_"))


def test_every_script_has_a_smoke_test() -> None:
    assert set(SCRIPTS) == set(SMOKES) | OWN_TESTS
    for name in OWN_TESTS:
        assert (REPO / "tests" / "experiments" / f"test_{name}").is_file()
    for name in SCRIPTS:
        assert '"--smoke"' in (EXPERIMENTS / name).read_text(), name


@pytest.mark.parametrize("script", [*SCRIPTS, "_common.py"])
def test_script_imports_no_script_and_no_private_name(script: str) -> None:
    """A script imports packages' public names and the shared ``_common``; none patches ``sys.path``."""
    source = (EXPERIMENTS / script).read_text()
    assert "sys.path" not in source
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules, names = [a.name for a in node.names], []
        elif isinstance(node, ast.ImportFrom):
            modules, names = [node.module or ""], [a.name for a in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            private = any(p.startswith("_") and p != "__future__" for p in parts)
            assert module == "_common" or not private, f"{script} imports the private module {module}"
            assert f"{parts[0]}.py" not in SCRIPTS, f"{script} imports the script {module}"
        assert not any(n.startswith("_") for n in names), (script, names)
