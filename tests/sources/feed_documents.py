"""Feed documents as real publishers write them: RSS 2.0 (RFC 822 dates, HTML in an
escaped <description>), RSS 1.0 (RDF, dc:date), RSS 0.91 (no dates at all) and Atom
(RFC 3339 dates, relative links against the feed's address)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import format_datetime
from html import escape


@dataclass(frozen=True)
class Entry:
    guid: str
    title: str
    link: str
    published: datetime | None
    html: str  # the entry's description/content, as HTML


def rss2(entries: list[Entry], title: str = "Acme blog") -> str:
    items = "".join(
        f"""
    <item>
      <title>{escape(e.title)}</title>
      <link>{escape(e.link)}</link>
      <guid isPermaLink="false">{escape(e.guid)}</guid>
      {f"<pubDate>{format_datetime(e.published)}</pubDate>" if e.published else ""}
      <description>{escape(e.html)}</description>
    </item>"""
        for e in entries
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom">
  <channel>
    <title>{escape(title)}</title>
    <link>https://blog.example.com/</link>
    <description>News from Acme</description>{items}
  </channel>
</rss>
"""


def rss1(entries: list[Entry]) -> str:
    items = "".join(
        f"""
  <item rdf:about="{escape(e.link)}">
    <title>{escape(e.title)}</title>
    <link>{escape(e.link)}</link>
    <description>{escape(e.html)}</description>
    {f"<dc:date>{e.published.isoformat()}</dc:date>" if e.published else ""}
  </item>"""
        for e in entries
    )
    return f"""<?xml version="1.0" encoding="utf-8"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
         xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="https://blog.example.com/rss">
    <title>Acme blog</title>
    <link>https://blog.example.com/</link>
    <description>News from Acme</description>
  </channel>{items}
</rdf:RDF>
"""


def rss091(entries: list[Entry]) -> str:
    items = "".join(
        f"""
    <item>
      <title>{escape(e.title)}</title>
      <link>{escape(e.link)}</link>
      <description>{escape(e.html)}</description>
    </item>"""
        for e in entries
    )
    return f"""<?xml version="1.0" encoding="ISO-8859-1"?>
<rss version="0.91">
  <channel>
    <title>Acme blog</title>
    <link>https://blog.example.com/</link>
    <description>News from Acme</description>
    <language>en-us</language>{items}
  </channel>
</rss>
"""


def atom(entries: list[Entry]) -> str:
    items = "".join(
        f"""
  <entry>
    <title type="html">{escape(e.title)}</title>
    <link rel="alternate" type="text/html" href="{escape(e.link)}"/>
    <id>{escape(e.guid)}</id>
    {f"<published>{e.published.isoformat()}</published>" if e.published else ""}
    {f"<updated>{e.published.isoformat()}</updated>" if e.published else ""}
    <content type="html">{escape(e.html)}</content>
  </entry>"""
        for e in entries
    )
    return f"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Acme blog</title>
  <id>urn:uuid:60a76c80-d399-11d9-b93C-0003939e0af6</id>
  <updated>2026-03-08T12:00:00Z</updated>
  <author><name>Acme</name></author>{items}
</feed>
"""


def posts_feed(base_url: str, numbers: Iterable[int], published: datetime) -> str:
    """RSS 2.0 of entries `post-N` ("Post N", linked under `base_url`), newest first, the
    N-th published N hours after `published`."""
    return rss2(
        [
            Entry(
                f"post-{n}",
                f"Post {n}",
                f"{base_url}/posts/{n}",
                published + timedelta(hours=n),
                "<p>News.</p>",
            )
            for n in sorted(numbers, reverse=True)
        ]
    )


def with_enclosure(document: str, guid: str, image_url: str, caption: str) -> str:
    """`document` with an image enclosure (captioned by its title) on the entry `guid`."""
    tag = f'<guid isPermaLink="false">{guid}</guid>'
    enclosure = f'<enclosure url="{image_url}" type="image/jpeg" length="1" title="{caption}"/>'
    return document.replace(tag, tag + enclosure)
