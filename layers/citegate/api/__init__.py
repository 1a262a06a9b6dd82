"""The HTTP face: the route table, handler plumbing (admission, errors to statuses, streaming), OpenAPI,
health, SnapStart.
"""
