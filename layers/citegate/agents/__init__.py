"""Agents over the knowledge: spec 003's retrieval and summary agents, spec 001's chats, the agent tools
and the governed knowledge entry.
"""
