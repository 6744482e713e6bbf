"""The Docker image and compose file say what the README promises: a readiness probe,
bytecode compiled at build, a small build context, and replicas that are given longer
to stop than their running model calls get. Checked without a Docker engine."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from core.setup.durations import parse_duration

REPO = Path(__file__).resolve().parents[2]
CHECK_JSONSCHEMA = Path(sys.prefix) / "bin" / "check-jsonschema"


def compose() -> dict:  # type: ignore[type-arg]
    return dict(YAML(typ="safe").load((REPO / "compose.yaml").read_text()))


@pytest.mark.slow
def test_compose_file_is_valid_against_the_vendored_compose_spec() -> None:
    result = subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.compose-spec", "compose.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_replicas_share_postgresql_and_outlast_their_shutdown_grace() -> None:
    services = compose()["services"]
    galley = services["galley"]
    assert galley["deploy"]["replicas"] >= 2
    command = galley["command"]
    grace = int(command[command.index("--shutdown-grace") + 1])
    assert parse_duration(galley["stop_grace_period"]).total_seconds() > grace
    database_url = compose()["x-galley-environment"]["GALLEY_DATABASE_URL"]
    assert database_url.startswith("postgresql://")
    volume = services["postgres"]["volumes"][0].split(":")[0]
    assert volume in compose()["volumes"]


def test_image_probes_readiness_and_compiles_bytecode() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    [healthcheck] = [line for line in dockerfile.splitlines() if line.startswith("HEALTHCHECK")]
    assert "/readyz" in healthcheck and "GALLEY_HTTP_PORT" in healthcheck
    assert "--compile-bytecode" in dockerfile
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".venv", "*.db", ".git"} <= ignored
    grace = re.search(r"--shutdown-grace\", \"(\d+)\"", dockerfile)
    assert grace is not None and int(grace.group(1)) < 45  # the README's --stop-timeout


def test_compose_replicas_listen_on_their_network_and_publish_no_port() -> None:
    """Outside a container Galley listens on 127.0.0.1; in compose, Prometheus and a load
    balancer on the compose network must reach /metrics, /readyz and /slack/events, and
    nothing outside it."""
    environment = compose()["x-galley-environment"]
    assert environment["GALLEY_HTTP_HOST"] == "0.0.0.0"
    galley = compose()["services"]["galley"]
    assert str(environment["GALLEY_HTTP_PORT"]) in [str(p) for p in galley["expose"]]
    assert "ports" not in galley
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "GALLEY_HTTP_HOST=0.0.0.0" in dockerfile  # the image's healthcheck and -p reach it


def test_every_secret_a_config_can_name_reaches_both_containers() -> None:
    """Each platform's default secret variable and GALLEY_GITHUB_TOKEN are passed by
    name; a variable the config names itself (`secret_env`) comes from galley.env,
    which both the migration and the replicas read, and which may be absent."""
    from core.setup.publish_targets import BlueskyTarget, LinkedInTarget, MastodonTarget

    named = {
        str(target.model_fields["secret_env"].default)
        for target in (BlueskyTarget, MastodonTarget, LinkedInTarget)
    } | {"GALLEY_GITHUB_TOKEN", "ANTHROPIC_API_KEY", "SLACK_BOT_TOKEN"}
    passed = set(compose()["x-galley-environment"])
    assert named - passed == set()
    for name in ("migrate", "galley"):
        service = compose()["services"][name]
        assert set(service["environment"]) == passed
        assert service["env_file"] == [{"path": "./galley.env", "required": False}]
    assert "galley.env" in (REPO / ".dockerignore").read_text().split()
