"""`examples/operator.ipynb` runs top to bottom in a real Jupyter kernel (nbclient),
against a database prepared by real `galley draft` processes and the fake Anthropic
API as its own process: one slot drafted, one failed.

Checks the notebook's outputs (an HTML table of the waiting drafts, images) and the
database afterwards (the approval recorded with the notebook user as actor, the failed
run drafted again), and that the stored notebook carries no outputs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient
from sqlmodel import col, select

from core.models import EventRow, RunRow
from core.states import RunState
from core.store import Store
from tests.conftest import config_text
from tests.fakes.anthropic_api import read_requests, status, write_script
from tests.processes import GALLEY, REPO, fake_server, galley_env

pytestmark = pytest.mark.slow

NOTEBOOK = REPO / "examples" / "operator.ipynb"
USER = "U0EDITOR"
RECIPE = "weekly-update"
DRAFTED_SLOT, FAILED_SLOT = "2026-11-23T09:00", "2026-11-16T09:00"
KEY = f"linkedin|{RECIPE}@{DRAFTED_SLOT}|v1"
FAILED_RUN = f"{RECIPE}@{FAILED_SLOT}"


def outputs(notebook: Any) -> list[dict[str, Any]]:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]


def test_the_stored_notebook_has_no_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert any("import galley" in c.source for c in code)
    assert not any("import core" in c.source or "from core" in c.source for c in code)


def test_the_operator_notebook_runs_against_a_database_galley_drafted(
    tmp_path: Path, sqlite_url: str
) -> None:
    config = tmp_path / "galley.toml"
    people = f'approvers = ["{USER}"]\nadmins = ["{USER}"]'
    config.write_text(
        config_text().replace(
            'review_channel = "C0REVIEW"', f'review_channel = "C0REVIEW"\n{people}'
        )
    )
    state_file = tmp_path / "fake-anthropic.json"
    with fake_server("tests.fakes.anthropic_api", state_file) as url:
        env = galley_env(
            GALLEY_CONFIG=str(config),
            GALLEY_DATABASE_URL=sqlite_url,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=url,
            GALLEY_USER=USER,
        )
        write_script(state_file, [status(400)])
        assert _galley_draft(env, tmp_path, FAILED_SLOT) == 1
        assert _galley_draft(env, tmp_path, DRAFTED_SLOT) == 0

        notebook = nbformat.read(NOTEBOOK, as_version=4)
        client = NotebookClient(
            notebook,
            timeout=120,
            kernel_name="python3",
            resources={"metadata": {"path": str(tmp_path)}},
        )
        client.execute(env=env)
        requests = read_requests(state_file)

    html = [o["data"]["text/html"] for o in outputs(notebook) if "text/html" in o.get("data", {})]
    images = [o for o in outputs(notebook) if "image/png" in o.get("data", {})]
    errors = [o for o in outputs(notebook) if o.get("output_type") == "error"]
    assert errors == []
    assert any('<table class="galley"><caption>drafts' in page and KEY in page for page in html)
    assert len(images) >= 6  # every plot cell shows a figure

    store = Store(sqlite_url)
    with store.transaction() as session:
        [approval] = session.exec(
            select(EventRow).where(
                col(EventRow.subject_id) == KEY, col(EventRow.to_state) == "approved"
            )
        ).all()
        retried = session.exec(select(RunRow).where(col(RunRow.id) == FAILED_RUN)).one()
    store.dispose()
    assert approval.actor == USER
    assert retried.state == RunState.AWAITING_REVIEW
    assert len(requests) == 3  # the failed call, the draft, the retry


def _galley_draft(env: dict[str, str], cwd: Path, slot: str) -> int:
    finished = subprocess.run(
        [str(GALLEY), "draft", RECIPE, "--slot", slot, "--json"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return finished.returncode
