"""What the documentation is missing: question signals grouped into gaps, and the answer summary."""
