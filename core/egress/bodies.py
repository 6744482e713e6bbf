"""An answer's body read under its bounds (docs/design.md §33): bytes on the wire and
bytes after decoding both capped, only `gzip`, `deflate` or no encoding accepted, and the
decoding done a bounded piece at a time, so a small compressed answer can never inflate
past the cap in memory. Reads the socket; never writes.
"""

from __future__ import annotations

import zlib

import httpx

from core.errors import NotFetched
from core.policies import FetchStop

ACCEPT_ENCODING = "gzip, deflate"  # sent with every request; anything else is refused
RAW_CHUNK = 65_536  # bytes read from the wire at a time
_ENCODINGS = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}


def over_cap(where: str, limit: int) -> NotFetched:
    return NotFetched(f"the answer from {where} is over {limit:,} bytes", stop=FetchStop.OVER_CAP)


def read_bounded(response: httpx.Response, limit: int, where: str) -> bytes:
    """The decoded body, at most `limit` bytes both on the wire and decoded; NotFetched
    naming the bound when either is passed, or the encoding when it is not accepted."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise over_cap(where, limit)
    decoder = BoundedDecoder(response.headers.get("content-encoding", ""), where, limit)
    on_wire = 0
    for raw in response.iter_raw(RAW_CHUNK):
        on_wire += len(raw)
        if on_wire > limit:
            raise over_cap(where, limit)
        decoder.decode(raw)
    return decoder.finish()


class BoundedDecoder:
    """One body's decoding under `limit` decoded bytes: identity, gzip or deflate
    (zlib-wrapped or raw, as servers send it). Each step asks zlib for at most one byte
    more than the room left, so nothing past the cap is ever inflated."""

    def __init__(self, content_encoding: str, where: str, limit: int) -> None:
        self._where = where
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._kind = _accepted(content_encoding, where)
        self._inflate = _decompressor(self._kind)

    def decode(self, raw: bytes) -> None:
        if self._inflate is None:
            self._keep(raw)
            return
        try:
            self._keep(self._inflate.decompress(raw, self._room() + 1))
        except zlib.error:
            if not self._to_raw_deflate():
                raise self._corrupt() from None
            self.decode(raw)

    def finish(self) -> bytes:
        if self._inflate is not None:
            try:
                self._keep(self._inflate.flush(self._room() + 1))
            except zlib.error:
                raise self._corrupt() from None
        return b"".join(self._parts)

    def _room(self) -> int:
        return self._limit - self._size

    def _keep(self, piece: bytes) -> None:
        if len(piece) > self._room():
            raise over_cap(self._where, self._limit)
        self._size += len(piece)
        self._parts.append(piece)

    def _to_raw_deflate(self) -> bool:
        """Some servers send deflate without its zlib header (httpx accepts it too):
        switch to raw deflate once, before any output; False when that cannot help."""
        if self._kind != "deflate" or self._size:
            return False
        self._kind = "raw deflate"
        self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        return True

    def _corrupt(self) -> NotFetched:
        return NotFetched(f"the answer from {self._where} is not valid {self._kind}")


def _accepted(content_encoding: str, where: str) -> str:
    """The one coding of an answer: identity, gzip or deflate; NotFetched for any other
    (br and zstd are never asked for) or for codings stacked."""
    codings = [c.strip().lower() for c in content_encoding.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return "identity"
    if len(codings) == 1 and codings[0] in _ENCODINGS:
        return _ENCODINGS[codings[0]]
    raise NotFetched(
        f"the answer from {where} is encoded as {content_encoding.strip()!r}: "
        f"only {ACCEPT_ENCODING} or none is accepted"
    )


def _decompressor(kind: str) -> zlib._Decompress | None:
    if kind == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if kind == "deflate":
        return zlib.decompressobj()
    return None
