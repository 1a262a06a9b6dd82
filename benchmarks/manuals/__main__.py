"""Real manuals end to end (`make eval`; `make bench` with --only-ingest --bench); see docs/evaluation.md.

For each manual: the pinned Debian package is fetched, checked and extracted (.cache/manuals/), a
fresh `citegate serve` starts on a free port, ONE `citegate ingest <html root> --kb <manual>` is
timed, then every question of the chosen splits goes through retrieve and ask over HTTP.
Results merge into OUT/manuals.json (per manual) and OUT/manuals.md is rendered from it.

    python -m benchmarks.manuals --manuals python,git,postgresql --out docs/results
    python -m benchmarks.manuals --manuals postgresql --only-ingest --bench

To measure another commit's layer with this harness: `git archive <commit> | tar -x -C DIR`, then
run with PYTHONPATH=DIR/layers and CITEGATE_CODE_COMMIT=<commit> (the server inherits both).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.manuals import fetch, report
from benchmarks.manuals.run import Options, run_manual
from benchmarks.manuals.sets import MANUALS, SETS, present, problems

ROOT = Path(__file__).resolve().parents[2]
BENCH_FILE = ROOT / "bench-results" / "manuals-ingestion.json"


def _manuals(value: str) -> list[str]:
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = set(chosen) - set(MANUALS)
    if not chosen:
        raise argparse.ArgumentTypeError(f"name at least one of {', '.join(MANUALS)}")
    if unknown:
        raise argparse.ArgumentTypeError(
            f"choose from {', '.join(MANUALS)} (got {', '.join(sorted(unknown))})"
        )
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.manuals",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--manuals", type=_manuals, default=list(MANUALS), help="comma-separated")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results", help="results folder")
    parser.add_argument("--split", choices=("dev", "test", "both"), default="both")
    parser.add_argument("--only-ingest", action="store_true", help="ingest and measure; no questions")
    parser.add_argument(
        "--bench",
        action="store_true",
        help="also embed the same children with the embedder alone; figures to --bench-out",
    )
    parser.add_argument("--bench-out", type=Path, default=BENCH_FILE)
    parser.add_argument("--keep-server", action="store_true", help="leave citegate serve running at the end")
    parser.add_argument(
        "--data-root",
        type=Path,
        help="keep each manual's server state in DIR/<manual> (and reuse it: ingest then resumes, and the "
        "first run ever over it stays the reported one); default: a fresh temporary folder",
    )
    parser.add_argument(
        "--complete-runs",
        type=int,
        default=5,
        help="further `citegate ingest` runs (resuming) while the first leaves files out, so the "
        "questions see the whole manual (default 5)",
    )
    args = parser.parse_args(argv)

    if not args.only_ingest:
        missing = [m for m in args.manuals if m not in present(SETS)]
        if missing:
            parser.error(f"no question set for {', '.join(missing)} in {SETS} (or pass --only-ingest)")
        broken = {m: problems(m) for m in args.manuals}
        for manual, found in broken.items():
            if found:
                parser.error(f"the {manual} set breaks the shared format: {'; '.join(found[:5])}")
    # A stop request (SIGTERM, or SIGINT even when started in the background, where it is ignored)
    # unwinds like Ctrl-C, so the server this run started is stopped cleanly.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    splits = ("test", "dev") if args.split == "both" else (args.split,)
    manifest = fetch.load_manifest()
    options = Options(
        splits=splits,
        only_ingest=args.only_ingest,
        bench=args.bench,
        keep_server=args.keep_server,
        data_root=args.data_root.resolve() if args.data_root else None,
        complete_runs=args.complete_runs,
    )
    results: dict[str, Any] = {}
    path = args.out / report.TABLE_FILE
    for name in args.manuals:
        try:
            results[name] = run_manual(name, manifest[name], options)
        except fetch.FetchError as error:
            print(f"benchmarks.manuals: {error}", file=sys.stderr)
            return 1
        if not args.only_ingest:  # each manual as soon as it is done: a later failure loses nothing
            path = report.write(args.out, {name: results[name]})
    if not args.only_ingest:
        print(f"wrote {path} and {path.with_name(report.RESULTS_FILE)}", file=sys.stderr)
    if args.bench:
        args.bench_out.parent.mkdir(parents=True, exist_ok=True)
        bench = {name: {k: v for k, v in result.items() if k != "splits"} for name, result in results.items()}
        args.bench_out.write_text(json.dumps(bench, indent=1) + "\n")
        print(f"wrote {args.bench_out}", file=sys.stderr)
    for name, result in results.items():
        ingest = result["ingest"]
        first = ingest["first"]
        line = (
            f"{name}: first ingest {first['failed']} failed of {first['files']} files, "
            f"{first['wall_s']:.0f} s, {ingest.get('kb_chunks')} chunks; "
            f"runs to complete {ingest['runs_to_complete']}"
        )
        for split, entry in result.get("splits", {}).items():
            s = entry["summary"]["shares"]
            line += (
                f"\n  {split}: top 8 {s['retrieval']}, right {s['right']}, in-domain declined "
                f"{s['declined_in_domain']}, off-topic declined {s['declined_off_topic']}"
            )
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
