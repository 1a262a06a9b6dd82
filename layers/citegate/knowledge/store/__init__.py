"""Data access: the only modules that talk to DynamoDB and S3."""
