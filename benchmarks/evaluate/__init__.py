"""`make eval`: citegate's retrieval and answer quality on the shared sets, beside the peers.

    python -m benchmarks.evaluate [--embedders use,e5] [--sets scifact,cmrc2018,squad2_dev]

See docs/evaluation.md.
"""
