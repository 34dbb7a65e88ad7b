"""experiments/transfer_benchmark.py in its smoke configuration, on a tiny base that excluded its targets."""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from nasrlm._processes import usable_cores
from nasrlm.cli import main

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "transfer_benchmark.py"
EXCLUDE = "nb201:*acc*,*:titan_rtx_*,*:gold_6226,*:pixel2,*:raspi4,*:eyeriss,*:fpga"


@pytest.mark.slow
def test_smoke_run_prints_every_table(tmp_path: Path, data_dir: Path, load_script) -> None:
    base, leaky, other = tmp_path / "base", tmp_path / "leaky", tmp_path / "nb301"
    assert main(["pretrain", "--data-dir", str(data_dir), "-o", str(base), "--spaces", "nb201", "--exclude",
                 EXCLUDE, "--max-rows", "16", "--free-rows", "0", "--max-steps", "2", "--size", "tiny",
                 "--device", "cpu", "--quiet"]) == 0
    # a base that saw its targets; NB301's, not NB101's: its table needs no hashing of the whole space
    for out, space in ((leaky, "nb201"), (other, "nb301")):
        assert main(["pretrain", "--data-dir", str(data_dir), "-o", str(out), "--spaces", space,
                     "--max-rows", "24", "--free-rows", "0", "--max-steps", "1", "--size", "tiny",
                     "--quiet"]) == 0
    runs = {  # each a process of its own, side by side
        "every table": (base, "--spaces", "nb201", "--methods",
                        "rlm-graph,rlm-ctx,forest,forest+rlm,ctx-ridge,ridge"),
        "another space's transfer": (base, "--tasks", "acc", "--methods",
                                     "forest,transfer-forest,rlm-given-forest", "--transfer", str(other)),
        "zero-shot": (other, "--tasks", "acc", "--methods", "zero-shot,rlm,forest,rank-blend", "--also-mean"),
    }
    refused = {  # what each is refused with, checked in this process while those run
        "a leaky base": ((leaky, "--tasks", "acc"), f"base {leaky} saw nb201 accuracy columns"),
        "a transfer forest fitted on the targets": (
            (base, "--tasks", "acc", "--methods", "forest,transfer-forest", "--transfer", str(leaky)),
            "was fitted on nb201 accuracies ['nb201:acc']"),
        "zero-shot without an accuracy rank": ((base, "--tasks", "acc", "--methods", "zero-shot"),
                                               "no accuracy_rank tag"),
    }
    script, threads = load_script(SCRIPT), torch.get_num_threads()
    with ThreadPoolExecutor(max_workers=usable_cores()) as pool:
        started = {name: pool.submit(_benchmark, data_dir, model, tmp_path / f"cache-{k}", *options)
                   for k, (name, (model, *options)) in enumerate(runs.items())}
        try:
            for k, ((model, *options), says) in enumerate(refused.values()):
                with pytest.raises(SystemExit, match=re.escape(says)):
                    script.main(["--data-dir", str(data_dir), "--base", str(model), "--smoke",
                                 "--cache", str(tmp_path / f"refused-{k}"), *options])
        finally:
            torch.set_num_threads(threads)  # the script sets its own
    done = {name: future.result() for name, future in started.items()}

    run = done["every table"]
    assert run.returncode == 0, run.stderr[-2000:]
    header = "| nb201 acc | forest | forest+rlm | forest+rlm/2 | rlm-graph | rlm-graph (prior alone) |"
    assert header in run.stdout
    assert "| N=20 |" in run.stdout and "| rlm-ctx | rlm-ctx (prior alone) |" in run.stdout
    assert "| nb201 unseen device | ridge | ctx-ridge |" in run.stdout and "| fpga |" in run.stdout
    # a transfer forest fitted on another space's accuracy is read
    run = done["another space's transfer"]
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| nb201 acc | forest | transfer-forest | rlm-given-forest |" in run.stdout
    # zero-shot needs a base with the cross-space accuracy rank: NB301's has one, NB201's alone not
    run = done["zero-shot"]
    assert run.returncode == 0, run.stderr[-2000:]
    blends = " | ".join(f"forest·rlm {w}" for w in (0.05, 0.1, 0.2, 0.5))  # rank-blend's columns
    assert f"| nb201 acc | zero-shot | forest | rlm | rlm, mean of samples | {blends} |" in run.stdout
    assert "nb201 zero-shot:" in run.stdout


def test_rank_blend_without_both_methods_it_blends_is_refused(capsys: pytest.CaptureFixture[str],
                                                               load_script) -> None:
    with pytest.raises(SystemExit) as exit_:
        load_script(SCRIPT).main(["--data-dir", "DATA", "--base", "BASE", "--methods", "forest,rank-blend"])
    assert exit_.value.code == 2
    assert "rank-blend averages the ranks of forest and rlm: name both" in capsys.readouterr().err


def _benchmark(data_dir: Path, base: Path, cache: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, f"experiments/{SCRIPT}", "--data-dir", str(data_dir),
                           "--base", str(base), "--smoke", "--cache", str(cache), *options],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
