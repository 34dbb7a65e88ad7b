"""The commands about spaces and their objectives: ``spaces``, ``export``, ``measure``, ``data``,
``objectives``."""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

import search_spaces
from nasrlm.cli._common import (
    DEFAULT_DB,
    CliError,
    Command,
    _add_selection,
    _check_db,
    _check_output_dir,
    _check_output_file,
    _count,
    _db_default,
    _positive_int,
)
from nasrlm.cli._inputs import _arch_ids, _objective_names, _profile, _space
from nasrlm.data import available_objectives, load_table, resolve_data_dir
from nasrlm.data._table import META_SUFFIX


class Spaces(Command):
    name = "spaces"
    help = "list the search spaces"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="machine-readable output")

    def run(self, args: argparse.Namespace) -> int:
        rows = [_space(name).describe() for name in search_spaces.available_spaces()]
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        for row in rows:
            size = f"{row['size']:,}" if row["size"] is not None else "unbounded"
            shape = "x".join(map(str, row["input_shape"]))
            print(f"{row['name']:<12} {size:>12} archs  input {shape:<12} {row['doc']}")
        return 0


class Export(Command):
    name = "export"
    help = "architecture -> canonical ONNX text or ONNX model"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("space")
        _add_selection(p)
        p.add_argument("--format", choices=["text", "jsonl", "onnx"], default="text",
                       help="text (default; '# id' headers between several), jsonl, or onnx files")
        p.add_argument("-o", "--output", help="file (or directory for several onnx models); default stdout")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    def run(self, args: argparse.Namespace) -> int:
        space = _space(args.space)
        ids = _arch_ids(space, args)
        bar = tqdm(ids, desc=f"export {space.name}", unit="arch", disable=len(ids) < 50 or args.quiet)
        if args.format == "onnx" and args.output is None:
            raise CliError("--format onnx writes binary files: give -o FILE (one arch) or -o DIR (several)")
        if args.format == "onnx" and len(ids) > 1:
            _check_output_dir(args.output, "-o")
        elif args.output:
            _check_output_file(args.output, "-o")
        if args.format == "onnx":
            import onnx

            if len(ids) == 1:
                onnx.save_model(_built(space, ids[0], space.to_onnx, alone=True), args.output)
                print(f"wrote {args.output}", file=sys.stderr)
                return 0
            out = Path(args.output)
            out.mkdir(parents=True, exist_ok=True)
            failed = 0
            with open(out / "index.csv", "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["file", "arch_id"])
                for k, arch_id in enumerate(bar):
                    model = _built(space, arch_id, space.to_onnx)
                    if model is None:
                        failed += 1
                        continue
                    name = f"{space.name}_{k:05d}.onnx"
                    onnx.save_model(model, out / name)
                    writer.writerow([name, arch_id])
            print(f"wrote {len(ids) - failed} models and index.csv to {out}", file=sys.stderr)
            return _failures(failed, len(ids))
        stream = open(args.output, "w") if args.output else sys.stdout  # noqa: SIM115 - stdout is not ours to close
        failed = 0
        try:
            for arch_id in bar:
                text = _built(space, arch_id, space.to_text, alone=len(ids) == 1)
                if text is None:
                    failed += 1
                    continue
                if args.format == "jsonl":
                    stream.write(json.dumps({"space": space.name, "arch_id": arch_id, "text": text}) + "\n")
                elif len(ids) == 1:
                    stream.write(text)
                else:
                    stream.write(f"# {arch_id}\n{text}\n")
        finally:
            if stream is not sys.stdout:
                stream.close()
        return _failures(failed, len(ids))


def _built(space: search_spaces.SearchSpace, arch_id: str, build: Callable[[Any], Any], *,
           alone: bool = False) -> Any:
    """``build(space.parse(arch_id))``; where the space raises (a bug in it, not in the command), one
    warning line naming the architecture and None, or for the only architecture asked a one-line error."""
    from nasrlm.free_labels import failure_line

    try:
        return build(space.parse(arch_id))
    except Exception as error:
        message = failure_line(space, arch_id, "build", error)
        if alone:
            raise CliError(message) from None
        print(f"nasrlm: warning: {message}", file=sys.stderr)
        return None


def _failures(failed: int, total: int) -> int:
    """Exit status 1, with a line saying so, where some architectures failed; else 0."""
    if failed:
        print(f"nasrlm: {failed} of {total} architectures failed (see the warnings above)", file=sys.stderr)
    return 1 if failed else 0


class Measure(Command):
    name = "measure"
    help = "time architectures with onnxruntime on this machine (resumable)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("space")
        p.add_argument("--device", default="cpu-1t-b1",
                       help="profile 'cpu-<threads>t-b<batch>' or 'cuda-b<batch>' (default cpu-1t-b1)")
        _add_selection(p, allow_all=True)
        p.add_argument("--db", default=_db_default(),
                       help=f"SQLite latency store (default $NASRLM_DB or {DEFAULT_DB})")
        p.add_argument("--warmup", type=_count, default=10,
                       help="untimed runs per architecture (default 10)")
        p.add_argument("--runs", type=_positive_int, default=50,
                       help="timed runs per architecture (default 50)")
        p.add_argument("--json", action="store_true", help="print one JSON line per architecture")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    def run(self, args: argparse.Namespace) -> int:
        from nasrlm.free_labels import failure_line
        from nasrlm.measure import LatencyStore, measure_archs

        space = _space(args.space)
        profile = _profile(args.device, "--device", run=True, space=space)
        ids = _arch_ids(space, args)
        _check_db(args.db, "--db")
        failed: list[str] = []

        def warn(arch_id: str, error: Exception) -> None:
            failed.append(arch_id)
            print(f"nasrlm: warning: {failure_line(space, arch_id, 'build or run', error)}", file=sys.stderr)

        with LatencyStore(args.db) as store:
            before = len(store.missing(space.name, ids, profile))
            results = measure_archs(space, ids, profile, store, warmup=args.warmup, runs=args.runs,
                                    progress=not args.quiet, on_error=warn)
        if not results:
            return _failures(len(failed), len(ids))
        if args.json:
            for arch_id, r in results.items():
                print(json.dumps({"arch_id": arch_id, "profile": r.profile, "median_ms": r.median_ms,
                                  "p10_ms": r.p10_ms, "p90_ms": r.p90_ms, "batch": r.batch,
                                  "threads": r.threads, "provider": r.provider}))
        elif len(results) <= 20:
            for arch_id, r in results.items():
                print(f"{r.median_ms:9.3f} ms  [{r.p10_ms:.3f}, {r.p90_ms:.3f}]  {arch_id}")
        medians = sorted(r.median_ms for r in results.values())
        print(f"{profile.name}: {before - len(failed)} measured now, {len(ids) - before} already in "
              f"{args.db}; "
              f"median latency {medians[len(medians) // 2]:.3f} ms (batch {profile.batch}, "
              f"range {medians[0]:.3f}-{medians[-1]:.3f} ms)", file=sys.stderr)
        return _failures(len(failed), len(ids))


class Data(Command):
    name = "data"
    help = "a table of objectives (published or measured), one row per architecture"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("space")
        p.add_argument("--objectives", required=True, help="comma-separated names, e.g. acc,pixel3,cpu-1t-b1")
        p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")
        p.add_argument("--db", default=_db_default(), help="latency store for measured profiles")
        p.add_argument("-o", "--output", required=True, help="CSV file to write ('-' for stdout)")

    def run(self, args: argparse.Namespace) -> int:
        space = _space(args.space)
        names = _objective_names(args.objectives)
        if args.output != "-":
            _check_output_file(args.output, "-o")
            _check_output_file(args.output + META_SUFFIX, "-o")
        data_dir = resolve_data_dir(args.data_dir)
        extra = {}
        from nasrlm.measure import is_profile

        measured = [n for n in names if is_profile(n)]
        if measured:
            from nasrlm.measure import LatencyStore, measured_objective

            if not Path(args.db).exists():
                raise CliError(f"objective {measured[0]!r} is a measured profile but latency store "
                               f"{args.db} does not exist; run 'nasrlm measure {space.name} --device "
                               f"{measured[0]} ...'")
            _check_db(args.db, "--db")
            with LatencyStore(args.db) as store:
                for name in measured:
                    extra[name] = measured_objective(store, space.name, name)
        from nasrlm.free_labels import computed_objectives, computed_values

        computed = computed_objectives(space, names, data_dir)
        if computed:  # for the rows the other objectives have
            others = [n for n in names if n not in {o.name for o in computed}]
            if not others:
                raise CliError(f"--objectives: {', '.join(o.name for o in computed)} are computed for the "
                               f"architectures of the other objectives; name a published or measured one too")
            rows = load_table(space.name, others, data_dir, extra=extra).ids
            extra.update(computed_values(space, computed, rows))
        table = load_table(space.name, names, data_dir, extra=extra)
        if args.output == "-":
            with tempfile.TemporaryDirectory() as tmp:
                path = table.to_csv(Path(tmp) / "table.csv")
                sys.stdout.write(path.read_text())
        else:
            table.to_csv(args.output)
            print(f"wrote {len(table.ids):,} rows x {len(names)} objectives to {args.output} "
                  f"(+ {args.output}.meta.json)", file=sys.stderr)
        for objective in table.objectives:
            present = int((~np.isnan(table.column(objective.name))).sum())
            print(f"  {objective.header:<24} {present:>6,} values  source: {objective.source}",
                  file=sys.stderr)
        return 0


class Objectives(Command):
    name = "objectives"
    help = "list the objectives a space can have ('nasrlm data', 'nasrlm search')"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("space")
        p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")

    def run(self, args: argparse.Namespace) -> int:
        space = _space(args.space)  # an unknown name is an error, not an empty list
        from nasrlm.free_labels import FREE_OBJECTIVES, computed_objectives
        from nasrlm.search import TRAINED

        data_dir = resolve_data_dir(args.data_dir)
        for objective in available_objectives(space.name, data_dir):
            print(f"{objective.header:<28} {objective.description}")
        for objective in computed_objectives(space, [o.name for o in FREE_OBJECTIVES], data_dir):
            print(f"{objective.header:<28} {objective.description} (computed for any architecture)")
        print("cpu-<T>t-b<B>, cuda-b<B>      latency measured by 'nasrlm measure' (read from --db), or live "
              "by 'nasrlm search'")
        print(f"{TRAINED:<28} validation accuracy of the network trained by 'nasrlm search --train DATASET'")
        return 0
