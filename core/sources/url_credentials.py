"""What in a URL is a credential (docs/design.md §26), written once: a configured URL
holding one is refused by `galley check`, and every link an item brings is stripped of
it where the item is made, so nothing Galley stores, shows, posts or gives the model holds
a password or a token. A source's credential comes from the environment instead
(core/sources/source_secrets.py). Never puts a credential's value into a message.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_plus, urlsplit, urlunsplit

# Query (or fragment) parameters that hold a credential, by their whole name, lower case
# with `-` read as `_`; and the last words of a name that make it one (feed_token,
# private_token, X-Amz-Signature, X-Amz-Security-Token, client_secret).
CREDENTIAL_PARAMETERS = frozenset(
    {
        "token",
        "access_token",
        "auth",
        "auth_token",
        "authorization",
        "key",
        "api_key",
        "apikey",
        "access_key",
        "secret",
        "password",
        "passwd",
        "pwd",
        "sig",
        "signature",
        "sessionid",
        "jwt",
    }
)
CREDENTIAL_LAST_WORDS = frozenset({"token", "secret", "password", "signature", "credential"})


def is_credential_parameter(name: str) -> bool:
    words = [word for word in re.split(r"[^a-z0-9]+", unquote_plus(name).lower()) if word]
    return bool(words) and (
        "_".join(words) in CREDENTIAL_PARAMETERS or words[-1] in CREDENTIAL_LAST_WORDS
    )


def credential_in_url(url: str) -> str | None:
    """What in `url` is a credential, in words and without its value; None when nothing."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        return "a user:password@ (userinfo)"
    pairs = [*_pairs(parts.query), *_pairs(parts.fragment, named_only=True)]
    names = sorted({_name(pair) for pair in pairs if _holds_credential(pair)})
    if names:
        return f"a credential-like query parameter ({', '.join(names)})"
    return None


def without_credentials(url: str) -> str:
    """`url` without its userinfo and its credential-like query and fragment parameters,
    the rest kept as written; `url` itself when it holds none, "" when it is no URL."""
    try:
        if credential_in_url(url) is None:
            return url
        parts = urlsplit(url)
    except ValueError:  # not a URL Python can read: nothing of it can be vouched for
        return ""
    query = [pair for pair in _pairs(parts.query) if not _holds_credential(pair)]
    fragment = [pair for pair in _pairs(parts.fragment) if not _holds_credential(pair, "=")]
    netloc = parts.netloc[parts.netloc.rfind("@") + 1 :]  # past a `user:password@`
    return urlunsplit((parts.scheme, netloc, parts.path, "&".join(query), "&".join(fragment)))


def _pairs(text: str, *, named_only: bool = False) -> list[str]:
    """`a=1&b=2` as its pairs, as written; `named_only`: only `name=value` ones (a
    fragment is mostly an anchor, `#get-a-token`, not parameters)."""
    pairs = [pair for pair in text.split("&") if pair]
    return [pair for pair in pairs if "=" in pair] if named_only else pairs


def _name(pair: str) -> str:
    return pair.partition("=")[0]


def _holds_credential(pair: str, needs: str = "") -> bool:
    return needs in pair and is_credential_parameter(_name(pair))
