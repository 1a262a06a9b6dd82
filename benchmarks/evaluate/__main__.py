"""Command line of the evaluation harness (`make eval`); see docs/evaluation.md.

Every chosen set is ingested through citegate's ingestion service and workflow steps into its own
knowledge base, once per chosen embedder; dev and test queries go through `retrieve` and `ask`,
and through the peers (LangChain EnsembleRetriever, rank_bm25) on the same children and vectors.
Results merge into OUT/results.json (per embedder and set), and OUT/results.md and the PNG charts
are regenerated from it. Embeddings are cached under bench-results/cache/ (eval_retrieval's
format and files), so only the first run of an embedder on a set embeds anything.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SETS = ("scifact", "cmrc2018", "squad2_dev")
EMBEDDERS = ("use", "e5")


def _csv(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(value: str) -> list[str]:
        items = [v.strip() for v in value.split(",") if v.strip()]
        if not items or set(items) - set(choices):
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)} (got {value!r})")
        return items

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.evaluate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--embedders", type=_csv(EMBEDDERS), default=["use"], help="comma-separated: use,e5")
    parser.add_argument("--sets", type=_csv(SETS), default=list(SETS), help="comma-separated set names")
    parser.add_argument("--data", type=Path, default=ROOT / "benchmarks" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results", help="results folder")
    parser.add_argument(
        "--cache-root",
        type=Path,
        default=None,
        help="folder holding cache/ instead of bench-results/ (e.g. an empty one, to time a cold cache)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("CITEGATE_EMBEDDER_THREADS", "2")),
        help="embedder threads (the service's CITEGATE_EMBEDDER_THREADS, default 2); on a machine "
        "shared beyond its cores, 1 is several times faster (threads wait on each other)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=100,
        help="documents per ingestion workflow batch (the queue consumer makes batches of 10; "
        "larger ones run the same steps with fewer calls, and index the same chunks)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="only rewrite results.md and the charts from OUT/results.json (no ingestion, no queries)",
    )
    args = parser.parse_args(argv)

    # Before citegate is imported: its logger reads the level once, and one INFO line per
    # ingested document would bury the figures.
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

    from benchmarks import eval_retrieval
    from benchmarks.evaluate import peers, report
    from benchmarks.evaluate.ingest import start_stack
    from benchmarks.evaluate.run import evaluate_set, git_commit, ingest_set, load_set, loadavg

    from citegate.knowledge.embedding import build_embedder

    del peers  # imported up front: a missing `bench` group fails now, not after the first ingestion
    if args.report_only:
        return _write_report(args.out, json.loads((args.out / report.RESULTS_FILE).read_text()))
    if args.cache_root is not None:
        # eval_retrieval.embed_cached reads its cache folder from this module global.
        eval_retrieval.RESULTS = args.cache_root.resolve()

    results: dict[str, Any] = {}
    started = time.perf_counter()
    at_start = loadavg()
    embedders = {kind: build_embedder(kind, threads=args.threads) for kind in args.embedders}
    caches: dict[str, set[str]] = {kind: set() for kind in embedders}
    with tempfile.TemporaryDirectory(prefix="citegate-eval-") as tmp:
        work = Path(tmp)
        stack = start_stack(work / "data")
        try:
            for set_name in args.sets:
                ds = load_set(args.data, set_name)
                ingested = ingest_set(stack, work, ds, embedders, args.batch_size)
                try:
                    for kind, embedder in embedders.items():
                        set_report = evaluate_set(ds, ingested, kind, embedder)
                        caches[kind].add(set_report["embedding_cache_before_run"])
                        results = report.merge(args.out, kind, set_name, set_report)
                finally:
                    ingested.close()
        finally:
            stack.stop()
    seconds = round(time.perf_counter() - started, 1)
    for kind in embedders:
        states = caches[kind]
        summary = {
            "cache": "warm" if states == {"present"} else "cold" if states == {"absent"} else "mixed",
            "sets": list(args.sets),
            "embedders_in_run": list(embedders),
            "embedder_threads": args.threads,
            "ingest_batch_size": args.batch_size,
            "seconds": seconds,
            "commit": git_commit(),
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "loadavg_at_start": at_start,
            "loadavg_at_end": loadavg(),
        }
        results = report.merge(args.out, kind, None, summary)
        print(f"\n{kind}: {summary}", flush=True)

    return _write_report(args.out, results)


def _write_report(out: Path, results: dict[str, Any]) -> int:
    from benchmarks.evaluate import report

    table = report.markdown(results)
    (out / report.TABLE_FILE).write_text(table)
    charts = report.charts(results, out)
    print("\n" + table)
    print(
        f"wrote {out / report.RESULTS_FILE}, {out / report.TABLE_FILE}, {', '.join(str(c) for c in charts)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
