"""`galley status`'s Core read (core/api/status_read.py): its tables cannot drift from
the models, and the command that uses it loads no ORM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import SQLModel

import core.models  # noqa: F401  (fills SQLModel.metadata)
from core.api.status_read import TABLES
from core.store.engine import Store
from tests.conftest import config_text
from tests.harness.processes import galley_env

DIALECTS = (sqlite.dialect(), postgresql.dialect())


def _sql_types(column: sa.Column[object]) -> list[str]:
    """The column's type as each backend's DDL spells it."""
    return [column.type.compile(dialect=dialect) for dialect in DIALECTS]


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_each_column_of_the_status_read_is_the_models_column(table: sa.Table) -> None:
    model = SQLModel.metadata.tables[table.name]
    for column in table.columns:
        assert column.name in model.columns, f"{table.name}.{column.name} is not in the models"
        modelled = model.columns[column.name]
        where = f"{table.name}.{column.name}"
        assert column.primary_key == modelled.primary_key, where
        assert column.nullable == modelled.nullable, where
        assert _sql_types(column) == _sql_types(modelled), where


@pytest.mark.slow
def test_galley_status_loads_no_orm(tmp_path: Path) -> None:
    (tmp_path / "galley.toml").write_text(config_text())
    url = f"sqlite:///{tmp_path / 'galley.db'}"
    Store(url).upgrade()  # status then finds the schema current: no Alembic, no models
    env = galley_env(GALLEY_CONFIG=str(tmp_path / "galley.toml"), GALLEY_DATABASE_URL=url)
    script = (
        "import sys\n"
        "from bot.launch import main\n"
        "sys.argv = ['galley', 'status', '--json']\n"
        "try:\n    main()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "heavy = ('sqlmodel', 'sqlalchemy.orm', 'core.models', 'anthropic', 'alembic')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
