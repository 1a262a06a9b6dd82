"""What every domain stands on: settings, resource shapes, errors, logging and metrics, ids, AWS clients,
secrets, DynamoDB helpers, the caller's principal.
"""
