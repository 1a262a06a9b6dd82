"""The CDK app: `cdk synth -c stage=dev` (cdk.json runs this file with the project's venv).

Context: `stage` (default "dev") and the `citegate:*` keys read by infra.stack.CitegateConfig.
cdk-nag's AwsSolutions checks run on the whole app; every suppression carries its reason.

The stack is environment-agnostic, always: no account or region is given to it, so every ARN,
URL and name that needs them holds `AWS::AccountId` / `AWS::Region`, and the same template deploys
wherever `cdk deploy` (or CloudFormation) runs it: the CLI's region (AWS_REGION, the profile), and
in the pipeline its own region variable. `CDK_DEFAULT_ACCOUNT`/`CDK_DEFAULT_REGION`, which the CLI
sets from the profile (us-east-1 when none is configured), are deliberately not read: they fixed the
region at synth time, and a deploy of that assembly went to that region whatever the pipeline said.
tests/infrastructure/test_deploy.py checks that no template holds a literal region or account.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# `python infra/app.py` puts infra/ first on sys.path, where infra/constructs would shadow the
# `constructs` library that aws_cdk imports: import this app's packages from the repo root instead.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
for path in (REPO, REPO / "layers"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
# The jsii runtime warns on every start under Node 20; it works, and the warning drowns the output.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App, Validations  # noqa: E402
from cdk_nag import AwsSolutionsChecks  # noqa: E402

from citegate.platform import resources  # noqa: E402
from infra.stack import CitegateConfig, CitegateStack  # noqa: E402


def build(
    context: dict[str, Any] | None = None, *, outdir: str | None = None, nag: bool = True
) -> tuple[App, CitegateStack]:
    """The app and its stack, with cdk-nag's AwsSolutions pack as a validation plugin: `app.synth()`
    fails on any finding that is not acknowledged with a reason. Tests pass `nag=False` and run the
    pack themselves (`AwsSolutionsChecks().validate_scope(stack)`) to list the findings."""
    app = App(context=context, outdir=outdir)
    config = CitegateConfig.from_context(app.node.try_get_context)
    stack = CitegateStack(
        app,
        f"{resources.APP}-{config.stage}",
        config=config,
        env=None,  # environment-agnostic (module docstring)
        description=f"citegate ({config.stage}): governed, cited knowledge answering",
    )
    if nag:
        Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, stack


def main() -> None:
    app, _ = build()
    app.synth()


if __name__ == "__main__":
    main()
