"""citegate: governed, cited knowledge answering for people and AI agents."""

__version__ = "0.1.0"
