"""Agents over the knowledge base: spec 003's retrieval + summary agents and spec 001's chats."""
