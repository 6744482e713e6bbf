"""The Bluesky fake answers as the reference PDS does (docs/design.md §20): the same raw
XRPC request goes to both, for each call Galley makes (createSession, refreshSession,
createRecord, getRecord; applyWrites, listRecords and uploadBlob once the fake serves
them, skipped until then), and their answers must agree.

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


def write(rkey: str, text: str) -> dict[str, Any]:
    return {
        "$type": "com.atproto.repo.applyWrites#create",
        "collection": POST,
        "rkey": rkey,
        "value": {**RECORD, "text": text},
    }


def keys(n: int) -> list[str]:
    return [bluesky_record_key(f"{KEY}|part:{i}") for i in range(n)]


def apply_writes(pds: Server, writes: list[dict[str, Any]]) -> httpx.Response:
    body = {"repo": pds.account.did, "writes": writes}
    return pds.call("com.atproto.repo.applyWrites", json=body, headers=pds.signed())


def apply_writes_of_a_thread(pds: Server) -> object:
    first, second = keys(2)
    answer = apply_writes(pds, [write(first, "one"), write(second, "two")])
    made = answer.json()
    results = [
        (r["$type"], r["uri"] == f"at://{pds.account.did}/{POST}/{k}", r["validationStatus"])
        for r, k in zip(made["results"], (first, second), strict=True)
    ]
    return answer.status_code, results, sorted(made["commit"])


def apply_writes_with_a_taken_key_writes_nothing(pds: Server) -> object:
    fresh, taken = keys(2)
    pds.create(RECORD, rkey=taken)
    status, error, _ = pds.said(apply_writes(pds, [write(fresh, "new"), write(taken, "again")]))
    return status, error, pds.get(pds.account.did, fresh).status_code


def apply_writes_with_an_invalid_part_writes_nothing(pds: Server) -> object:
    good, bad = keys(2)
    status, error, _ = pds.said(apply_writes(pds, [write(good, "fine"), write(bad, "a" * 301)]))
    return status, error, pds.get(pds.account.did, good).status_code


def apply_writes_over_the_limit(pds: Server) -> object:
    status, error, _ = pds.said(apply_writes(pds, [write(k, "x") for k in keys(201)]))
    return status, error


def list_records_page_by_page(pds: Server) -> object:
    made = keys(3)
    for rkey in made:
        pds.create(RECORD, rkey=rkey)
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        params = {"repo": pds.account.did, "collection": POST, "limit": "2"}
        if cursor:
            params["cursor"] = cursor
        page = pds.call("com.atproto.repo.listRecords", params=params).json()
        if not page["records"]:
            break
        pages.append([made.index(r["uri"].rsplit("/", 1)[1]) for r in page["records"]])
        cursor = page.get("cursor")
        if cursor is None:
            break
    return pages  # newest key first, two a page


def upload_blob_twice(pds: Server) -> object:
    png = b"\x89PNG\r\n\x1a\n" + bytes(100)
    headers = {**pds.signed(), "Content-Type": "image/png"}
    first, again = (
        pds.call("com.atproto.repo.uploadBlob", content=png, headers=headers).json()["blob"]
        for _ in range(2)
    )
    shape = (first["$type"], first["mimeType"], first["size"], sorted(first["ref"]))
    unsigned = pds.call(
        "com.atproto.repo.uploadBlob", content=png, headers={"Content-Type": "image/png"}
    )
    return shape, first["ref"] == again["ref"], pds.said(unsigned)


PNG = b"\x89PNG\r\n\x1a\n" + bytes(100)
MISSING_BLOB = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"


def upload(pds: Server, data: bytes, media_type: str = "image/png") -> httpx.Response:
    headers = {**pds.signed(), "Content-Type": media_type}
    return pds.call("com.atproto.repo.uploadBlob", content=data, headers=headers)


def blob_ref(cid: str, size: int, media_type: str = "image/png") -> dict[str, Any]:
    return {"$type": "blob", "ref": {"$link": cid}, "mimeType": media_type, "size": size}


def with_images(*blobs: dict[str, Any]) -> dict[str, Any]:
    images = [{"alt": f"image {n}", "image": blob} for n, blob in enumerate(blobs)]
    return {**RECORD, "embed": {"$type": "app.bsky.embed.images", "images": images}}


def upload_blob_over_the_upload_limit(pds: Server) -> object:
    return pds.said(upload(pds, PNG + bytes(5 * 1024 * 1024)))


def upload_blob_typed_otherwise(pds: Server) -> object:
    return upload(pds, PNG, "image/jpeg").json()["blob"]["mimeType"]


def post_naming_a_blob_never_uploaded(pds: Server) -> object:
    return pds.said(pds.create(with_images(blob_ref(MISSING_BLOB, len(PNG)))))


def post_naming_a_blob_over_the_image_limit(pds: Server) -> object:
    blob = upload(pds, PNG + bytes(1_000_000)).json()["blob"]
    return pds.said(pds.create(with_images(blob)))


def post_naming_a_blob_under_another_type(pds: Server) -> object:
    blob = upload(pds, PNG).json()["blob"]
    return pds.said(pds.create(with_images({**blob, "mimeType": "image/jpeg"})))


def post_naming_a_blob_under_another_size(pds: Server) -> object:
    blob = upload(pds, PNG).json()["blob"]
    return pds.said(pds.create(with_images({**blob, "size": len(PNG) + 1})))


def post_naming_five_images(pds: Server) -> object:
    blob = upload(pds, PNG).json()["blob"]
    status, error, _ = pds.said(pds.create(with_images(*[blob] * 5)))
    return status, error


def post_naming_an_uploaded_blob(pds: Server) -> object:
    blob = upload(pds, PNG).json()["blob"]
    made = pds.create(with_images(blob))
    stored = pds.get(pds.account.did, RKEY).json()["value"]["embed"]["images"][0]["image"]
    return made.status_code, stored == blob


# the method a case needs that the fake may not serve yet (threads and images add them)
NEEDS = {
    "apply_writes_of_a_thread": "com.atproto.repo.applyWrites",
    "apply_writes_with_a_taken_key_writes_nothing": "com.atproto.repo.applyWrites",
    "apply_writes_with_an_invalid_part_writes_nothing": "com.atproto.repo.applyWrites",
    "apply_writes_over_the_limit": "com.atproto.repo.applyWrites",
    "list_records_page_by_page": "com.atproto.repo.listRecords",
    "upload_blob_twice": "com.atproto.repo.uploadBlob",
    "upload_blob_over_the_upload_limit": "com.atproto.repo.uploadBlob",
    "upload_blob_typed_otherwise": "com.atproto.repo.uploadBlob",
    "post_naming_a_blob_over_the_image_limit": "com.atproto.repo.uploadBlob",
    "post_naming_five_images": "com.atproto.repo.uploadBlob",
    "post_naming_a_blob_under_another_type": "com.atproto.repo.uploadBlob",
    "post_naming_a_blob_under_another_size": "com.atproto.repo.uploadBlob",
    "post_naming_an_uploaded_blob": "com.atproto.repo.uploadBlob",
}

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
        apply_writes_of_a_thread,
        apply_writes_with_a_taken_key_writes_nothing,
        apply_writes_with_an_invalid_part_writes_nothing,
        apply_writes_over_the_limit,
        list_records_page_by_page,
        upload_blob_twice,
        upload_blob_over_the_upload_limit,
        upload_blob_typed_otherwise,
        post_naming_a_blob_never_uploaded,
        post_naming_a_blob_over_the_image_limit,
        post_naming_five_images,
        post_naming_a_blob_under_another_type,
        post_naming_a_blob_under_another_size,
        post_naming_an_uploaded_blob,
    )
}


@pytest.fixture
@starts_a_server
def fake() -> Iterator[FakeBluesky]:
    with FakeBluesky() as server:
        yield server


@pytest.mark.parametrize("case", CASES)
def test_the_fake_answers_as_the_real_pds(case: str, real_pds: RealPds, fake: FakeBluesky) -> None:
    needed = NEEDS.get(case)
    if needed and all(fake.route(m, f"/xrpc/{needed}") is None for m in ("GET", "POST")):
        pytest.skip(f"the Bluesky fake does not serve {needed} yet")
    real = signed_in(real_pds.url, real_pds.new_account())
    ours = signed_in(fake.url, Account(HANDLE, did_of(HANDLE), PASSWORD))
    assert CASES[case](ours) == CASES[case](real)
