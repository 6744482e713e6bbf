"""Bluesky post records as the PDS stores them, and their CIDs computed here: what lets a
whole thread go in one `com.atproto.repo.applyWrites` (docs/design.md §31).

Each reply's `reply.root` and `reply.parent` are strong references ({uri, cid}) to
records written in the same call, so their CIDs cannot be read from the server: a
record's CID is CIDv1, codec dag-cbor, sha-256 of the record's DAG-CBOR encoding, taken
over exactly the JSON that is sent. It never sends anything.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import MissingExtra
from core.publishing.platforms.post_text import url_spans

POST_COLLECTION = "app.bsky.feed.post"
CREATE_WRITE = "com.atproto.repo.applyWrites#create"
CID_PREFIX = bytes([0x01, 0x71, 0x12, 0x20])  # CIDv1, dag-cbor, sha2-256, 32 bytes


@dataclass(frozen=True)
class ThreadWrites:
    """One applyWrites body for a whole thread, and what each record will be: its
    `at://` URI and CID, the first part first."""

    body: dict[str, Any]
    uris: tuple[str, ...]
    cids: tuple[str, ...]

    def content(self) -> bytes:
        """The request body, byte for byte what the CIDs were computed over."""
        return json.dumps(self.body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def thread_writes(
    models: Any,
    did: str,
    texts: Sequence[str],
    rkeys: Sequence[str],
    created_at: str,
    first_embed: Any = None,
) -> ThreadWrites:
    """Every part a create under its own record key; each after the first replies to the
    one before it (`parent`) in the thread of the first (`root`). The first part carries
    `first_embed` (its images or link card, docs/design.md §32)."""
    writes: list[dict[str, Any]] = []
    uris: list[str] = []
    cids: list[str] = []
    for text, rkey in zip(texts, rkeys, strict=True):
        reply = None
        if uris:
            root = models.ComAtprotoRepoStrongRef.Main(uri=uris[0], cid=cids[0])
            parent = models.ComAtprotoRepoStrongRef.Main(uri=uris[-1], cid=cids[-1])
            reply = models.AppBskyFeedPost.ReplyRef(root=root, parent=parent)
        record = record_json(
            models.AppBskyFeedPost.Record(
                text=text,
                created_at=created_at,
                facets=link_facets(models, text) or None,
                reply=reply,
                embed=None if uris else first_embed,
            )
        )
        uris.append(f"at://{did}/{POST_COLLECTION}/{rkey}")
        cids.append(record_cid(record))
        writes.append(
            {"$type": CREATE_WRITE, "collection": POST_COLLECTION, "rkey": rkey, "value": record}
        )
    return ThreadWrites({"repo": did, "writes": writes}, tuple(uris), tuple(cids))


def record_json(record: Any) -> dict[str, Any]:
    """A record model as the atproto client sends it (every object with its `$type`)."""
    from atproto_client.models.utils import get_model_as_dict

    return dict(get_model_as_dict(record))


def record_cid(record: dict[str, Any]) -> str:
    """The CID a PDS gives this record: CIDv1 dag-cbor sha-256, base32 (`bafyrei…`)."""
    try:
        import libipld
    except ImportError:
        raise MissingExtra("atproto", "bluesky") from None
    digest = hashlib.sha256(libipld.encode_dag_cbor(_as_ipld(record, libipld))).digest()
    return str(libipld.encode_cid(CID_PREFIX + digest))


def _as_ipld(value: Any, libipld: Any) -> Any:
    """A record's JSON in the data model the PDS hashes: a `{"$link": cid}` (an image's
    blob ref) is a CID link, a `{"$bytes": …}` is bytes; the rest is as sent."""
    if isinstance(value, dict):
        if set(value) == {"$link"}:
            return libipld.decode_multibase(value["$link"])[1]  # raw CID: a tag-42 link
        if set(value) == {"$bytes"}:
            return base64.b64decode(value["$bytes"] + "=" * (-len(value["$bytes"]) % 4))
        return {key: _as_ipld(item, libipld) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_ipld(item, libipld) for item in value]
    return value


def link_facets(models: Any, text: str) -> list[Any]:
    """Links made clickable (a link facet notifies nobody); no mention facets, ever."""
    facets = []
    for start, end in url_spans(text):
        byte_start = len(text[:start].encode("utf-8"))
        byte_end = byte_start + len(text[start:end].encode("utf-8"))
        facets.append(
            models.AppBskyRichtextFacet.Main(
                features=[models.AppBskyRichtextFacet.Link(uri=text[start:end])],
                index=models.AppBskyRichtextFacet.ByteSlice(
                    byte_start=byte_start, byte_end=byte_end
                ),
            )
        )
    return facets
