"""`examples/operator.ipynb` runs top to bottom in a real Jupyter kernel (nbclient),
against a database prepared by real `galley draft` processes and the fake Anthropic
API as its own process: one slot drafted, one failed.

As the README's user (its config copied as the README says, `GALLEY_USER=U0EDITOR`,
relative paths, the kernel in a folder holding another config) it reads the database
`galley draft` made, says so, and changes nothing. With `WRITE = True` and a user who
is approver and admin: the approval is recorded with the notebook user as actor, and the
failed run drafted again. The stored notebook carries no outputs.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select

from core.models import EventRow, RunRow
from core.states import RunState
from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.anthropic_api import read_requests, status, write_script
from tests.harness.launcher import LAUNCHER
from tests.harness.processes import REPO, fake_server, galley_env

pytestmark = pytest.mark.slow

NOTEBOOK = REPO / "examples" / "operator.ipynb"
EXAMPLE_CONFIG = REPO / "examples" / "galley.toml"
USER = "U0EDITOR"
RECIPE = "weekly-update"
DRAFTED_SLOT, FAILED_SLOT = "2026-11-23T09:00", "2026-11-16T09:00"
KEY = f"linkedin|{RECIPE}@{DRAFTED_SLOT}|v1"
FAILED_RUN = f"{RECIPE}@{FAILED_SLOT}"


def _read_notebook() -> Any:
    # nbformat imports jsonschema, whose URI checks build their grammars at import
    # (seconds): imported when a test reads the notebook, not by every collection
    import nbformat

    return nbformat.read(NOTEBOOK, as_version=4)


def outputs(notebook: Any) -> list[dict[str, Any]]:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]


def test_the_stored_notebook_has_no_outputs() -> None:
    notebook = _read_notebook()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert any("import galley" in c.source for c in code)
    assert not any("import core" in c.source or "from core" in c.source for c in code)


def test_as_the_readmes_user_the_notebook_reads_the_database_galley_drafted_and_writes_nothing(
    tmp_path: Path,
) -> None:
    checkout = tmp_path / "checkout"  # where the README's commands run
    kernel_folder = checkout / "examples"  # where Jupyter starts the notebook's kernel
    kernel_folder.mkdir(parents=True)
    shutil.copy(EXAMPLE_CONFIG, checkout / "galley.toml")  # the README's first step
    shutil.copy(EXAMPLE_CONFIG, kernel_folder / "galley.toml")  # as in the checkout
    state_file = tmp_path / "fake-anthropic.json"
    with fake_server("tests.fakes.anthropic_api", state_file) as url:
        env = galley_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=url)
        for variable in ("GALLEY_CONFIG", "GALLEY_DATABASE_URL"):
            env.pop(variable, None)  # the defaults: galley.toml and sqlite:///galley.db
        write_script(state_file, [status(400)])
        assert _galley_draft(env, checkout, FAILED_SLOT) == 1
        assert _galley_draft(env, checkout, DRAFTED_SLOT) == 0
        database = checkout / "galley.db"
        assert database.exists()

        notebook = _execute(env | {"GALLEY_USER": USER, "PWD": str(checkout)}, kernel_folder)
        requests = read_requests(state_file)

    assert _errors(notebook) == []
    [opened] = [line for line in _printed(notebook) if line.startswith("galley: ")]
    assert opened == (
        f"galley: {checkout / 'galley.toml'} (2 recipes), database sqlite:///{database}, as {USER}"
    )
    assert not (kernel_folder / "galley.db").exists()  # no empty database made beside it
    assert any("WRITE is off" in line for line in _printed(notebook))
    assert len(_html_tables(notebook, KEY)) >= 1
    store = Store(f"sqlite:///{database}")
    with store.read() as session:
        approvals = session.exec(select(EventRow).where(col(EventRow.to_state) == "approved"))
        assert list(approvals) == []
        failed = session.exec(select(RunRow).where(col(RunRow.id) == FAILED_RUN)).one()
    store.dispose()
    assert failed.state == RunState.FAILED
    assert len(requests) == 2  # the two `galley draft` calls; the notebook called nothing


def test_with_writes_on_the_notebook_approves_and_retries_as_its_user(
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

        notebook = _execute(env, tmp_path, write=True)
        requests = read_requests(state_file)

    images = [o for o in outputs(notebook) if "image/png" in o.get("data", {})]
    assert _errors(notebook) == []
    assert _html_tables(notebook, KEY)
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


def _execute(env: dict[str, str], folder: Path, *, write: bool = False) -> Any:
    """The stored notebook, run top to bottom in a kernel started in `folder`;
    `write`: with its WRITE flag (the first code cell) set to True."""
    notebook = _read_notebook()
    flag = next(cell for cell in notebook.cells if cell.cell_type == "code")
    assert flag.source.startswith("WRITE = False")
    if write:
        flag.source = flag.source.replace("WRITE = False", "WRITE = True", 1)
    from nbclient import NotebookClient  # imports nbformat: see _read_notebook

    client = NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    client.execute(env=env)
    return notebook


def _errors(notebook: Any) -> list[dict[str, Any]]:
    return [o for o in outputs(notebook) if o.get("output_type") == "error"]


def _printed(notebook: Any) -> list[str]:
    streams = [o["text"] for o in outputs(notebook) if o.get("output_type") == "stream"]
    return [line for text in streams for line in text.splitlines()]


def _html_tables(notebook: Any, key: str) -> list[str]:
    pages = [o["data"]["text/html"] for o in outputs(notebook) if "text/html" in o.get("data", {})]
    return [
        page for page in pages if '<table class="galley"><caption>drafts' in page and key in page
    ]


def _galley_draft(env: dict[str, str], cwd: Path, slot: str) -> int:
    finished = LAUNCHER.run(["draft", RECIPE, "--slot", slot, "--json"], env, cwd, 60, cwd=cwd)
    return finished.returncode
