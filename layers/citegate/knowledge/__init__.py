"""The knowledge: knowledge bases, documents and their ingestion (parse, chunk, embed, index), search,
embedding, retrieval and citations.
"""
