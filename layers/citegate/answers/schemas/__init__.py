"""The answers' request and response models: ask, the Answer API, sessions, feedback."""
