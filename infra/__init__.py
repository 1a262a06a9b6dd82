"""citegate's AWS CDK app (Python): `infra/app.py` builds one stack from the domain constructs."""
