from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.unit.web.pages import State, serve


@pytest.fixture
def site() -> Iterator[tuple[str, State]]:
    with serve() as running:
        yield running
