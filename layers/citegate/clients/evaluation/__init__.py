"""Measuring retrieval quality and answer honesty on a labelled set (the shared BEIR-like format).

`dataset` reads a set folder, `metrics` scores ranked documents and answers (pure Python, so the
scores are importable anywhere: the in-process harness in benchmarks/ and `citegate eval`), and
`remote` runs a set against a citegate over HTTP with `citegate.clients.http_client.CitegateClient`.
"""
