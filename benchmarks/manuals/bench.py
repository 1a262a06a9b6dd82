"""The whole-manual ingestion against the embedder alone (`make bench`), as benchmarks/ingestion.py
compares the pipeline with the embedder: the same children (the project's parser and chunker on the
same files), embedded in one call by the same model without its cache, once before and once after
(here: after the server has stopped, so nothing else of ours runs beside it).
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from typing import Any


def ingested_files(root: Path) -> list[tuple[Path, str]]:
    """The files `citegate ingest <root>` sends, with their source names (its default selection)."""
    from citegate.knowledge.ingest.selection import select_files

    return select_files([root]).files


def children_texts(root: Path) -> tuple[list[str], int]:
    """(the children the pipeline embeds, files that did not parse) for every file of the manual."""
    from citegate.knowledge.ingest.chunking import chunk_document
    from citegate.knowledge.ingest.parsing import ParseError, parse_document

    texts: list[str] = []
    unparsed = 0
    for file, name in ingested_files(root):
        try:
            parsed = parse_document(file.read_bytes(), mime_type=None, source_name=name)
        except ParseError:
            unparsed += 1
            continue
        texts += [c.text for c in chunk_document(parsed).children]
    return texts, unparsed


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def embedder_alone(root: Path, pipeline_wall_s: float, pipeline_chunks: int) -> dict[str, Any]:
    """The embedder's own chunks/s on the manual's children, and the pipeline's ratio to it."""
    from citegate.knowledge.embedding import build_embedder
    from citegate.platform.settings import get_settings

    settings = get_settings()
    started = time.perf_counter()
    texts, unparsed = children_texts(root)
    parse_chunk_s = round(time.perf_counter() - started, 1)
    model = build_embedder(settings.embedder, threads=settings.embedder_threads)
    model.embed_documents(["warm up the model"])
    wall_started, cpu_started = time.perf_counter(), _cpu()
    model.embed_documents(texts)
    wall, cpu = time.perf_counter() - wall_started, _cpu() - cpu_started
    alone = len(texts) / wall if wall else 0.0
    pipeline = pipeline_chunks / pipeline_wall_s if pipeline_wall_s else 0.0
    return {
        "embedder": settings.embedder,
        "threads": settings.embedder_threads,
        "children": len(texts),
        "unparsed_files": unparsed,
        "parse_chunk_s": parse_chunk_s,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "chunks_per_s": round(alone, 1),
        "pipeline_chunks_per_s": round(pipeline, 1),
        # Issue 10's measure on a real manual: the whole run (submission, polling, every step)
        # over the embedder alone on the same texts.
        "ratio_wall": round(pipeline / alone, 3) if alone else None,
        "cores": os.cpu_count() or 1,
    }
