"""Test doubles that run on loopback (an OIDC issuer, ...), shared by unit and integration tests."""
