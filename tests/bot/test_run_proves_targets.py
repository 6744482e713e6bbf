"""`galley run` proves each publish target's credentials once when it starts, as `galley
check --online` does, and says which fail, one line each, before it says it runs; it
still starts, so review goes on while someone fixes the secret (docs/design.md §24).

A real `galley run` process against the fake Slack and Anthropic servers and the fake
Mastodon; asserted on the process's output (the product surface here) and the
requests the fake received. Both backends.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.store.engine import Store
from tests.conftest import config_text
from tests.fakes.mastodon import FakeMastodon
from tests.harness.deployments import Processes
from tests.harness.processes import fake_server, galley_run_env, wait_for
from tests.harness.timing import scaled

pytestmark = pytest.mark.slow

VERIFY = "/api/v1/accounts/verify_credentials"
RUNNING = "galley running"


@pytest.fixture
def mastodon() -> Iterator[FakeMastodon]:
    with FakeMastodon() as fake:
        yield fake


def test_a_wrong_mastodon_token_is_named_at_start_and_galley_still_runs(
    tmp_path: Path, db_url: str, mastodon: FakeMastodon
) -> None:
    config = tmp_path / "galley.toml"
    publish = f'publish = {{ to = "mastodon", instance = "{mastodon.url}" }}'
    config.write_text(re.sub(r"^(prompt = .*)$", rf"\1\n{publish}", config_text(), flags=re.M))
    with (
        fake_server("tests.fakes.anthropic_api", tmp_path / "anthropic.json") as anthropic_url,
        fake_server("tests.fakes.slack_api", tmp_path / "slack.json") as slack_url,
    ):
        env = galley_run_env(config, db_url, anthropic_url=anthropic_url, slack_url=slack_url)
        env["GALLEY_MASTODON_TOKEN"] = "not-the-token"
        processes = Processes(env, Store(db_url), tmp_path)
        bot = processes.start()
        try:
            wait_for(lambda: RUNNING in processes.log_of(1), 60, "galley running")
        finally:
            bot.send_signal(signal.SIGTERM)
            bot.wait(timeout=scaled(30))
            processes.close()

    lines = processes.log_of(1).splitlines()
    target = f"mastodon:{mastodon.url.removeprefix('http://')}"
    failed = [n for n, line in enumerate(lines) if f"{target}: FAILED" in line]
    [running] = [n for n, line in enumerate(lines) if RUNNING in line]
    assert len(failed) == 1 and failed[0] < running, lines  # said once, before running
    assert "GALLEY_MASTODON_TOKEN" in lines[failed[0]], lines[failed[0]]
    assert len(mastodon.requests_to(VERIFY)) == 1
    assert not mastodon.requests_to("/api/v1/statuses", "POST")
