"""Server-held policy: what each principal may call, see and change (spec 000 6.2, spec 002)."""
