"""citegate: governed, cited knowledge answering for people and AI agents."""

import os

# Before numpy loads OpenBLAS (it reads this once, when loaded): idle BLAS workers sleep after
# about 2^4 spins instead of 2^28. With the default they spin for a fraction of a second after
# every matrix product, taking a core from the request threads and the embedded AWS endpoint:
# embedding 937 children, CPU 7.8 -> 5.7 s for the same wall time (benchmarks/ingestion.py).
# An operator's own setting wins.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

__version__ = "0.1.0"
