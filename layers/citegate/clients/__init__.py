"""What talks to the service from outside: the citegate CLI, the MCP server, the demo, the HTTP client,
the remote evaluation.
"""
