"""The local runtime: the same handlers on one machine, with embedded AWS, search and models."""
