"""The agents' request and response models: spec 003's query, chats, the governed knowledge entry."""
