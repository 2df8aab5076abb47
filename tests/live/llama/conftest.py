"""Fixtures for the managed server's tests (tests/serve_fixtures.py)."""

from __future__ import annotations

from serve_fixtures import never_listens  # noqa: F401
