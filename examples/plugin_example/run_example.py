"""The worked example end to end: measure, tabulate, train and search the ``tinymb`` space from the CLI.

    python examples/plugin_example/run_example.py              # the guide's settings
    python examples/plugin_example/run_example.py --quick      # tiny settings (what the tests run)

Each step is an ordinary ``nasrlm`` command with ``--plugin tinymb_plugin.py`` in front (the script
prints it before running it), so the same commands work in a shell. The space has no published
tables, so every objective is a latency that nasrlm measures itself on this CPU: ``cpu-1t-b1`` (one
image, one thread) and ``cpu-2t-b8`` (a batch of 8 on two threads).

Without ``--quick`` everything up to the NSGA-II search takes about five minutes on two cores; the last
step, the search with the default RLM sampler, has a fixed set-up cost that is large for a torch space
(see ``search_spaces/README.md``, step 4: it had not finished after 31 minutes on a shared 2-core VM).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLUGIN = HERE / "tinymb_plugin.py"
OBJECTIVES = "cpu-1t-b1,cpu-2t-b8"


def commands(out: Path, *, quick: bool = False) -> list[list[str]]:
    """The ``nasrlm`` argument lists of the example, writing everything under ``out``."""
    db, table, model, run = (str(out / name) for name in ("latency.db", "tinymb.csv", "model", "search"))
    n, timing = ("12", ["--warmup", "2", "--runs", "10"]) if quick else ("48", [])
    train = (["--size", "tiny", "--epochs", "2", "--pretrain", "16", "--batch-size", "8"] if quick
             else ["--size", "tiny", "--epochs", "30", "--pretrain", "256"])
    plugin = ["--plugin", str(PLUGIN)]
    budget = "8" if quick else "40"
    return [
        [*plugin, "spaces"],
        *([*plugin, "measure", "tinymb", "--device", device, "--random", n, "--db", db, "--quiet", *timing]
          for device in OBJECTIVES.split(",")),
        [*plugin, "data", "tinymb", "--objectives", OBJECTIVES, "--db", db, "-o", table],
        [*plugin, "train", "--data", table, "-o", model, *train, "--threads", "1", "--quiet"],
        [*plugin, "search", "tinymb", "--objectives", OBJECTIVES, "--budget", budget, "--db", db,
         "--sampler", "nsga2", "--out", str(out / "nsga2"), "--compare", "random", "--quiet"],
        [*plugin, "search", "tinymb", "--objectives", OBJECTIVES, "--budget", budget, "--db", db,
         "--out", run, "--compare", "random", *(["--threads", "1"] if quick else []), "--quiet"],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/plugin_example"), help="output directory")
    parser.add_argument("--quick", action="store_true", help="tiny settings, about a minute")
    args = parser.parse_args(argv)
    from nasrlm.cli import main as nasrlm

    args.out.mkdir(parents=True, exist_ok=True)
    for argv_ in commands(args.out, quick=args.quick):
        print(f"$ nasrlm {shlex.join(argv_)}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        code = nasrlm(argv_)
        print(f"  ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
