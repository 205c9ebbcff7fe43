"""Fixtures: a fresh store of each backend (a JSON file, SQLite, and
PostgreSQL when ``RUDDER_TEST_PG_URL`` names a database to use)."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import rudder

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))


def _backends() -> list[str]:
    found = ["file", "sqlite"]
    if os.environ.get("RUDDER_TEST_PG_URL"):
        found.append("postgres")
    return found


@pytest.fixture(params=_backends())
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL of one backend, naming a store that does not exist yet."""
    if request.param == "file":
        return str(tmp_path / "tasks.json")
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'tasks.db'}"
    # One schema-free database per test: the tasks of others never show.
    base = os.environ["RUDDER_TEST_PG_URL"]
    return _fresh_pg_database(base)


def _fresh_pg_database(base: str) -> str:
    import subprocess

    name = f"py_{uuid.uuid4().hex[:12]}"
    subprocess.run(["psql", base, "-qc", f"CREATE DATABASE {name}"], check=True)
    # postgres://user@/postgres?host=...: the database is the path.
    url, query = base.split("?", 1) if "?" in base else (base, "")
    head, _, _ = url.rpartition("/")
    return f"{head}/{name}" + (f"?{query}" if query else "")


@pytest.fixture
def store(url: str) -> Iterator[rudder.Store]:
    with rudder.Store(url) as s:
        yield s
