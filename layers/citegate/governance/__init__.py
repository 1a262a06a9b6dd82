"""Who may do what, and the record of it: identity, policy, the governed call (checks and audit), rate
limits.
"""
