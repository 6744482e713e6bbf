"""The Bluesky fake answers as the reference PDS does (docs/design.md §20): the same raw
XRPC request goes to both, for each call Galley makes (createSession, refreshSession,
createRecord, getRecord), and their answers must agree.

An answer is compared as (status, XRPC error name, message) with the account's DID and
handle written as `{did}` and `{handle}`, or, for a success, as the fields Galley and
the `atproto` client read. Without the installed PDS these tests are skipped.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from core.identity import bluesky_record_key
from tests.fakes.bluesky import HANDLE, PASSWORD, FakeBluesky, did_of
from tests.harness.real_pds import Account, RealPds, real_pds
from tests.harness.slow_marks import starts_a_server
from tests.harness.timing import scaled

__all__ = ["real_pds"]  # the session's server, a fixture

POST = "app.bsky.feed.post"
KEY = "bluesky|weekly-update@2026-11-23T09:00|v1|publish:bluesky:acme.test"
RKEY = bluesky_record_key(KEY)
MISSING_RKEY = bluesky_record_key(KEY.replace("09:00", "10:00"))
STRANGER = "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"  # an account no server here hosts
RECORD = {"$type": POST, "text": "hello", "createdAt": "2026-11-23T09:00:00.000Z"}
SESSION_FIELDS = ("accessJwt", "refreshJwt", "handle", "did", "active", "didDoc")


@dataclass
class Server:
    """One PDS (the fake or the real one) and an account signed in on it."""

    url: str
    account: Account
    session: dict[str, Any]

    def call(self, nsid: str, **request: Any) -> httpx.Response:
        method = "POST" if "json" in request or "content" in request else "GET"
        return httpx.request(method, f"{self.url}/xrpc/{nsid}", timeout=scaled(30), **request)

    def signed(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.session['accessJwt']}"}

    def create(self, record: dict[str, Any], rkey: str | None = RKEY, **to: Any) -> httpx.Response:
        body = {"repo": self.account.did, "collection": POST, "record": record, **to}
        if rkey is not None:
            body["rkey"] = rkey
        return self.call("com.atproto.repo.createRecord", json=body, headers=self.signed())

    def get(self, repo: str, rkey: str) -> httpx.Response:
        params = {"repo": repo, "collection": POST, "rkey": rkey}
        return self.call("com.atproto.repo.getRecord", params=params)

    def refresh(self, token: str) -> httpx.Response:
        return self.call("com.atproto.server.refreshSession", json=None, headers=self.signed(token))

    def said(self, answer: httpx.Response) -> tuple[int, str | None, str]:
        """An error answer with this server's account written as placeholders."""
        body = answer.json()
        message = str(body.get("message", ""))
        message = message.replace(self.account.did, "{did}").replace(
            self.account.handle, "{handle}"
        )
        return answer.status_code, body.get("error"), message


def signed_in(url: str, account: Account) -> Server:
    answer = httpx.post(
        f"{url}/xrpc/com.atproto.server.createSession",
        json={"identifier": account.handle, "password": account.password},
        timeout=scaled(30),
    )
    answer.raise_for_status()
    return Server(url, account, answer.json())


def jti(token: str) -> str:
    payload = token.split(".")[1]
    return str(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["jti"])


# --- the cases: what each server answers, made comparable ----------------------------------


def wrong_password(pds: Server) -> object:
    body = {"identifier": pds.account.handle, "password": "not-the-password"}
    return pds.said(pds.call("com.atproto.server.createSession", json=body))


def session_fields(pds: Server) -> object:
    return sorted(field for field in SESSION_FIELDS if field in pds.session)


def create_without_a_token(pds: Server) -> object:
    body = {"repo": pds.account.did, "collection": POST, "rkey": RKEY, "record": RECORD}
    return pds.said(pds.call("com.atproto.repo.createRecord", json=body))


def create_with_a_token_it_did_not_issue(pds: Server) -> object:
    body = {"repo": pds.account.did, "collection": POST, "rkey": RKEY, "record": RECORD}
    forged = pds.session["accessJwt"].rsplit(".", 1)[0] + ".Zm9yZ2Vk"
    return pds.said(
        pds.call("com.atproto.repo.createRecord", json=body, headers=pds.signed(forged))
    )


def create_then_create_again(pds: Server) -> object:
    first = pds.create(RECORD)
    made = first.json()
    uri = f"at://{pds.account.did}/{POST}/{RKEY}"
    shape = (
        first.status_code,
        made["uri"] == uri,
        made["validationStatus"],
        sorted(made["commit"]),
    )
    return shape, pds.said(pds.create({**RECORD, "text": "another"}))


def create_too_long(pds: Server) -> object:
    return pds.said(pds.create({**RECORD, "text": "a" * 301}))


def create_under_a_key_that_is_not_a_tid(pds: Server) -> object:
    return pds.said(pds.create(RECORD, rkey="self"))


def create_in_a_repo_nobody_hosts(pds: Server) -> object:
    return pds.said(pds.create(RECORD, repo=STRANGER))


def get_by_did_and_by_handle(pds: Server) -> object:
    pds.create(RECORD)
    answers = [pds.get(repo, RKEY) for repo in (pds.account.did, pds.account.handle)]
    uri = f"at://{pds.account.did}/{POST}/{RKEY}"
    return [(a.status_code, a.json()["uri"] == uri, a.json()["value"]) for a in answers]


def get_a_missing_record(pds: Server) -> object:
    return pds.said(pds.get(pds.account.did, MISSING_RKEY))


def get_from_a_repo_nobody_hosts(pds: Server) -> object:
    status, error, _ = pds.said(pds.get(STRANGER, RKEY))  # the AppView's words differ
    return status, error


def refresh_twice_with_one_token(pds: Server) -> object:
    first, again = (pds.refresh(pds.session["refreshJwt"]) for _ in range(2))
    same_next = jti(first.json()["refreshJwt"]) == jti(again.json()["refreshJwt"])
    return first.status_code, again.status_code, same_next


def refresh_with_the_access_token(pds: Server) -> object:
    return pds.said(pds.refresh(pds.session["accessJwt"]))


CASES: dict[str, Callable[[Server], object]] = {
    case.__name__: case
    for case in (
        wrong_password,
        session_fields,
        create_without_a_token,
        create_with_a_token_it_did_not_issue,
        create_then_create_again,
        create_too_long,
        create_under_a_key_that_is_not_a_tid,
        create_in_a_repo_nobody_hosts,
        get_by_did_and_by_handle,
        get_a_missing_record,
        get_from_a_repo_nobody_hosts,
        refresh_twice_with_one_token,
        refresh_with_the_access_token,
    )
}


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeBluesky]:
    with FakeBluesky() as server:
        yield server


@pytest.mark.parametrize("case", CASES)
def test_the_fake_answers_as_the_real_pds(case: str, real_pds: RealPds, fake: FakeBluesky) -> None:
    real = signed_in(real_pds.url, real_pds.new_account())
    ours = signed_in(fake.url, Account(HANDLE, did_of(HANDLE), PASSWORD))
    assert CASES[case](ours) == CASES[case](real)
