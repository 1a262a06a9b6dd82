"""Ingestion: accept a document, then parse -> chunk -> embed -> index -> finalize as workflow steps."""
