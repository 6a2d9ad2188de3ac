"""Webhook unit fixtures: the shared in-memory apiserver (:mod:`dralab_kit.fixtures.fakeapi`)."""

from __future__ import annotations

import pytest

from dralab_kit.fixtures.fakeapi import FakeKube


def delete_uids(api: FakeKube) -> list[str | None]:
    """The uid precondition of each DELETE, in order."""
    return [c.delete_uid for c in api.calls if c.verb == "delete"]


@pytest.fixture
def fake_api() -> FakeKube:
    return FakeKube()
