"""Search engines behind one interface (base.SearchIndex): the embedded one (tantivy + numpy) and
OpenSearch.
"""
