"""docs/design.md is today's contract, and code cites it on topic.

Each section lists its topic words on the line under its heading
(`<!-- topics: backpressure, pending_limit, pause -->`). A citation of section N of
docs/design.md in code, tests or the README says at least one of section N's words in
the comment, docstring or paragraph around it, a few lines either side: a citation that
says none names the wrong section (the decision log was once cited as "Metrics and
logs"). The page itself holds no tracker reference and no path outside the repository.
The section sign is written as `S` here, so test_layers.py's check of every citation
does not read this file's examples as citations.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from tests.test_layers import CITATION, CITING_FOLDERS, DESIGN_FILE

S = "\N{SECTION SIGN}"
ROOT = Path(__file__).resolve().parent.parent
# the files that only show how a citation is written: examples, not citations
NOT_CITING = {Path(__file__).resolve(), ROOT / "tests" / "test_layers.py"}
CITING_PAGES = ("README.md",)
WINDOW_LINES = 4  # how far from a citation, within its comment or docstring, words count
HEADING = re.compile(r"^## (\d+)\. (.+)$")
TOPICS_LINE = re.compile(r"^<!-- topics: (.+) -->$")
SECTION_NAMED = re.compile(rf"(-?){S}(\d+)")
# Neither belongs in the contract: a tracker's numbers, or a file outside the repository.
# The product contract named bare (upper-case), numbered otherwise, is not cited either.
FOREIGN_REFERENCE = re.compile(r"\bissues? \d|/work/|shared/design|(?-i:\bDESIGN\b)", re.IGNORECASE)


@dataclass(frozen=True)
class OffTopic:
    path: str
    line: int
    cited: str
    topics: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.cited}: says none of {', '.join(self.topics)}"


def section_topics(page: str) -> dict[str, tuple[str, ...]]:
    """Section number -> its topic words, from the `topics` line right under its
    heading; a section without one maps to no words."""
    lines = page.splitlines()
    topics: dict[str, tuple[str, ...]] = {}
    for heading, below in zip(lines, [*lines[1:], ""], strict=True):
        if found := HEADING.match(heading):
            listed = TOPICS_LINE.match(below)
            words = listed.group(1).split(",") if listed else []
            topics[found.group(1)] = tuple(word.strip() for word in words if word.strip())
    return topics


def python_regions(text: str) -> list[tuple[int, int]]:
    """(first, last) line, 1-based, of each string and each run of comment lines."""
    regions: list[tuple[int, int]] = []
    comments: list[int] = []
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.STRING:
            regions.append((token.start[0], token.end[0]))
        elif token.type == tokenize.COMMENT:
            if comments and token.start[0] != comments[-1] + 1:
                regions.append((comments[0], comments[-1]))
                comments = []
            comments.append(token.start[0])
    if comments:
        regions.append((comments[0], comments[-1]))
    return regions


def paragraph_regions(text: str) -> list[tuple[int, int]]:
    """(first, last) line, 1-based, of each paragraph: lines between blank lines."""
    regions, start = [], None
    for number, line in enumerate([*text.splitlines(), ""], start=1):
        if line.strip() and start is None:
            start = number
        elif not line.strip() and start is not None:
            regions.append((start, number - 1))
            start = None
    return regions


def cited_groups(cited: str) -> list[list[str]]:
    """The sections a citation names, one group each; a range (4 to 5) is one group, any
    of whose sections it may be about."""
    groups: list[list[str]] = []
    for found in SECTION_NAMED.finditer(cited):
        number = int(found.group(2))
        if found.group(1) and groups:
            first = int(groups[-1][0])
            groups[-1] = [str(n) for n in range(first, number + 1)]
        else:
            groups.append([str(number)])
    return groups


def says_a_topic(text: str, topics: tuple[str, ...]) -> bool:
    """Whether `text` has a word starting with one of `topics` (any case)."""
    return any(re.search(rf"(?<![a-z0-9]){re.escape(t)}", text, re.IGNORECASE) for t in topics)


def off_topic_citations(
    path: str, text: str, regions: list[tuple[int, int]], topics: dict[str, tuple[str, ...]]
) -> list[OffTopic]:
    """Each section a citation in `text` names whose topic words are absent from the lines
    around it (its own comment, string or paragraph, `WINDOW_LINES` either side)."""
    lines = text.splitlines()
    found = []
    for citation in CITATION.finditer(text):
        line = text.count("\n", 0, citation.start()) + 1
        first, last = next(((a, b) for a, b in regions if a <= line <= b), (line, line))
        # and the line either side: the code a comment is about, the `def` of a docstring
        first, last = max(first - 1, line - WINDOW_LINES, 1), min(last + 1, line + WINDOW_LINES)
        around = "\n".join(lines[first - 1 : last])
        for group in cited_groups(citation.group(0)):
            words = tuple(word for number in group for word in topics.get(number, ()))
            if not says_a_topic(around, words):
                found.append(OffTopic(path, line, _named(group), words))
    return found


def _named(group: list[str]) -> str:
    return S + group[0] if len(group) == 1 else f"{S}{group[0]}-{S}{group[-1]}"


def citing_files() -> list[Path]:
    sources = [path for folder in CITING_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]
    return [path for path in sources if path not in NOT_CITING] + [ROOT / p for p in CITING_PAGES]


def regions_of(path: Path, text: str) -> list[tuple[int, int]]:
    return python_regions(text) if path.suffix == ".py" else paragraph_regions(text)


def test_every_section_lists_its_topics() -> None:
    topics = section_topics((ROOT / DESIGN_FILE).read_text())
    assert len(topics) > 30
    assert [number for number, words in topics.items() if not words] == []


def test_every_citation_says_a_word_of_its_sections_topic() -> None:
    """A citation names the section its code relies on: the words around it are that
    section's, so a number that drifted (a section moved, a second numbering) shows."""
    topics = section_topics((ROOT / DESIGN_FILE).read_text())
    found = []
    for path in citing_files():
        text = path.read_text()
        if CITATION.search(text) is None:
            continue  # nothing cited: no need to find its comments and strings
        relative = str(path.relative_to(ROOT))
        found += off_topic_citations(relative, text, regions_of(path, text), topics)
    assert "\n".join(map(str, found)) == ""


PLANTED_TOPICS = {
    "11": ("backpressure", "pending_limit"),
    "18": ("metric", "gauge"),
    "34": ("reminder", "decision log"),
    "4": ("claim",),
    "5": ("lease",),
}
PLANTED = '''"""The decision log (docs/design.md @34): who decided what."""

QUEUE = 3  # counted against pending_limit (docs/design.md @11)


def remind() -> None:
    """Reminders of a waiting draft (docs/design.md @18): once per interval."""
    # a lease taken over (docs/design.md @4-@5)
    # nothing of its topic here (docs/design.md @11 and @18)


def far() -> None:
    """A gauge, said far from the citation below.

    one
    two
    three
    four
    five
    docs/design.md @18
    """
'''.replace("@", S)


def test_the_topic_check_finds_a_planted_wrong_citation() -> None:
    found = off_topic_citations("m.py", PLANTED, python_regions(PLANTED), PLANTED_TOPICS)
    cited = [(p.line, p.cited.removeprefix(S)) for p in found]
    assert cited == [(7, "18"), (9, "11"), (9, "18"), (20, "18")]


def test_a_range_is_one_group_and_a_list_is_several() -> None:
    cited = "docs/design.md @3, @4-@6 and @12".replace("@", S)
    assert cited_groups(cited) == [["3"], ["4", "5", "6"], ["12"]]


def test_the_page_holds_no_tracker_reference_nor_a_path_outside_the_repository() -> None:
    page = (ROOT / DESIGN_FILE).read_text()
    assert FOREIGN_REFERENCE.findall(page) == []


def test_the_foreign_reference_check_finds_each_kind() -> None:
    text = "Issue 39, issue 41.2, /work/wt/x, `shared/Design`, (DE" + "SIGN 14); issues of, design"
    found = ["Issue 3", "issue 4", "/work/", "shared/Design", "DE" + "SIGN"]
    assert FOREIGN_REFERENCE.findall(text) == found


def test_each_section_takes_the_topics_line_under_its_own_heading() -> None:
    page = "## 1. One\n<!-- topics: a, b -->\n\ntext\n## 2. Two\n\n<!-- topics: c -->\n"
    assert section_topics(page) == {"1": ("a", "b"), "2": ()}
