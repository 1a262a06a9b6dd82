"""The knowledge's request and response models: knowledge bases, documents, retrieval."""
