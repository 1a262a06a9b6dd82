"""Sources: a knowledge base that follows a folder, a Git repository, a website or an S3 prefix."""
