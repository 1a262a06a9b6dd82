"""What the platform gives every domain, as Protocols: the settings, the tables, the AWS clients.

A domain's functions take the part of the composition root (citegate.container.Services) they use,
typed as a Protocol of their own domain; these are the pieces those Protocols share. Only the
composition root knows the concrete class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from citegate.platform.aws import AwsClients
    from citegate.platform.resources import TableShape
    from citegate.platform.settings import Settings


class Configured(Protocol):
    @property
    def settings(self) -> Settings: ...


class Tables(Protocol):
    def table(self, shape: TableShape) -> Any:
        """The boto3 Table resource of `shape`, built once per process."""
        ...


class Aws(Protocol):
    @property
    def aws(self) -> AwsClients: ...
