"""The layout's rules (ARCHITECTURE.md), checked on the source: core/ knows
nothing of Slack, neither its packages nor its markup. Core hands out facts; bot/
renders them as mrkdwn."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parent.parent / "core"
# Slack's mrkdwn: a mention or special token (<@U1>, <!here>, <#C1>), or *bold*
# (also *{name}* in an f-string). Docstrings and comments may quote it; code may not.
MARKUP = re.compile(r"<[@!#]|(?<![\w*])\*(?:\{|[^\s*{])[^*\n]*?\*(?![\w*])")


def _docstrings(tree: ast.AST) -> set[int]:
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, owners) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def string_literals(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every string the module's code builds, docstrings left out; an
    f-string is read with its placeholders, so `*{name}*` counts."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = _docstrings(tree)
    inside_fstrings = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            yield node.lineno, ast.unparse(node)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings | inside_fstrings
        ):
            yield node.lineno, node.value


def markup_in(path: Path) -> list[str]:
    return [
        f"{path.name}:{line}: {text!r}"
        for line, text in string_literals(path)
        if MARKUP.search(text)
    ]


def test_no_module_in_core_writes_slack_markup() -> None:
    found = [hit for path in sorted(CORE.rglob("*.py")) for hit in markup_in(path)]
    assert found == []


def test_no_module_in_core_imports_slack_or_bot() -> None:
    imported = []
    for path in sorted(CORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            imported += [f"{path.name}: {n}" for n in names if n.split(".")[0] in _SLACK]
    assert imported == []


_SLACK = {"slack_sdk", "slack_bolt", "bot"}


@pytest.mark.parametrize(
    ("source", "flagged"),
    [
        ('x = f"Drafting resumed for *{name}*."', True),
        ('x = "*Galley daily digest* today"', True),
        ('x = f"Already approved by <@{user}>."', True),
        ('x = "<!here> look"', True),
        ('x = "2 * 3 * 4"', False),
        ('x = "a*b"', False),
        ("def f(*args, **kwargs): pass", False),
        ('def f():\n    """The *scheduled* slot."""', False),
    ],
)
def test_the_markup_check_finds_markup_and_only_markup(
    tmp_path: Path, source: str, flagged: bool
) -> None:
    module = tmp_path / "module.py"
    module.write_text(source + "\n")
    assert bool(markup_in(module)) == flagged


def test_architecture_md_names_every_module_of_core_and_bot() -> None:
    """The map stays a map: a module nobody can find on it is a module nobody reads. A
    module of core/ is named by its path inside core/ (`drafting/service.py`), so two
    packages' `service.py` cannot hide behind each other."""
    root = CORE.parent
    page = (root / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"`([\w/]+\.py)`", page))
    modules = [
        p.relative_to(CORE).as_posix()
        for p in sorted(CORE.rglob("*.py"))
        if "migrations" not in p.parts
    ]
    modules += [p.name for p in sorted((root / "bot").glob("*.py"))]
    unnamed = [m for m in modules if not m.endswith("__init__.py") and m not in named]
    assert modules and unnamed == []


def _packages() -> list[Path]:
    return sorted(p.parent for p in CORE.rglob("__init__.py") if "migrations" not in p.parts)


def test_every_package_of_core_says_what_it_owns_and_what_it_never_does() -> None:
    """`ls -R core` is the architecture: each package's docstring names its home and
    the line it does not cross."""
    silent = []
    for package in _packages():
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        if package != CORE and "never" not in doc.lower():
            silent.append(package.relative_to(CORE).as_posix())
    assert len(_packages()) > 5 and silent == []


def _is_package(module: str) -> bool:
    return (CORE.parent / module.replace(".", "/") / "__init__.py").exists()


def _node(module: str) -> str:
    """The node a module counts as: its package (core.drafting.service -> core.drafting,
    core.publishing.platforms.webhook -> core.publishing.platforms), or, for a module of
    the ground floor, the module itself (core.identity)."""
    return module if _is_package(module) else module.rpartition(".")[0]


def _ground_node(module: str) -> str:
    node = _node(module)
    return module if node == "core" else node


# The stages of core/ in the order they may import, lowest first: each imports only the
# ground floor (core/'s own modules), the stages before it and its own subpackages. A new
# package takes its place here.
STAGES = (
    "telemetry",
    "egress",
    "store",
    "slots",
    "sources",
    "setup",
    "images",
    "drafting",
    "publishing",
    "review",
    "scheduling",
    "operations",
    "api",
)


def _stage(node: str) -> int | None:
    """Where a node stands: -1 on the ground floor, else its stage's place in STAGES;
    None for a package STAGES does not name."""
    parts = node.split(".")
    if len(parts) == 2 and not _is_package(node):
        return -1
    return STAGES.index(parts[1]) if parts[1] in STAGES else None


def _arrows() -> dict[str, set[str]]:
    """node -> the nodes it imports, every root module its own node."""
    graph: dict[str, set[str]] = {}
    for module, deps in _core_imports().items():
        node = _ground_node(module)
        graph.setdefault(node, set()).update(_ground_node(dep) for dep in deps)
    for node, deps in graph.items():
        deps.discard(node)
        deps.discard("core")  # `from core import identity` also names core.identity
    graph.pop("core", None)
    return graph


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Each import that climbs: a ground-floor module importing a stage, or a stage
    importing one after it in STAGES (or one STAGES does not name)."""
    climbs = []
    for node, deps in sorted(graph.items()):
        here = _stage(node)
        for dep in sorted(deps):
            there = _stage(dep)
            if here is None or there is None or there > here:
                climbs.append(f"{node} -> {dep}")
    return climbs


def test_the_ground_floor_imports_only_itself_and_no_stage_imports_upward() -> None:
    """Modules directly under core/ import only each other (a type for an annotation
    under TYPE_CHECKING at most); a stage imports the ground floor and the stages
    before it in STAGES. An upward arrow is where a cycle starts."""
    graph = _arrows()
    assert "core.identity" in graph and "core.drafting" in graph
    climbs = "\n".join(upward_arrows(graph))
    assert climbs == "", f"upward imports, or a package STAGES lacks (add it there):\n{climbs}"


def test_no_node_of_core_imports_itself_round_a_cycle() -> None:
    """Each root module counts as its own node beside the packages: the ground floor
    importing a stage that imports it back was once a cycle through seven packages
    (core.images -> core.ports -> core.port_values -> core.images)."""
    cycle = _cycle(_arrows())
    assert cycle == [], "import cycle: " + " -> ".join(cycle)


def test_the_upward_check_finds_a_climb() -> None:
    graph = {
        "core.identity": {"core.drafting"},
        "core.store": {"core.drafting", "core.identity"},
        "core.publishing": {"core.publishing.platforms", "core.drafting"},
        "core.publishing.platforms": {"core.store"},
    }
    assert upward_arrows(graph) == ["core.identity -> core.drafting", "core.store -> core.drafting"]


def _core_imports() -> dict[str, set[str]]:
    """core module -> the core modules it imports anywhere in its source, imports inside
    functions included: a lazy import hides a cycle from Python, not from a reader. A
    root module's imports under `if TYPE_CHECKING:` are left out: they name a type for an
    annotation and never run."""
    root = CORE.parent
    graph: dict[str, set[str]] = {}
    for path in sorted(CORE.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text())
        found = graph.setdefault(module, set())
        for node in ast.walk(tree):
            found |= _core_names(node)
        if len(parts) == 2:
            for guarded in _type_checking_blocks(tree):
                found -= {name for node in ast.walk(guarded) for name in _core_names(node)}
    return {module: deps & set(graph) for module, deps in graph.items()}


def _core_names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        if node.module == "core" or node.module.startswith("core."):
            # `from core.drafting import service` imports core.drafting.service
            return {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    elif isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name.startswith("core.")}
    return set()


def _type_checking_blocks(tree: ast.Module) -> list[ast.If]:
    return [
        node
        for node in tree.body
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
    ]


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle, as the modules along it, or [] when there is none."""
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        for dep in sorted(graph.get(module, set())):
            if found := walk(dep, [*path, module]):
                return found
        done.add(module)
        return []

    for module in sorted(graph):
        if found := walk(module, []):
            return found
    return []


def test_no_module_of_core_imports_itself_round_a_cycle() -> None:
    """The gauges once needed the alert thresholds: metrics → alerts → effects → history
    → observe → metrics, hidden by a lazy import. Each rule has one home, so none is."""
    cycle = _cycle(_core_imports())
    assert cycle == [], "import cycle: " + " -> ".join(cycle)


def _bot_imports() -> dict[str, set[str]]:
    """bot module -> the bot modules it imports anywhere in its source."""
    graph: dict[str, set[str]] = {}
    for path in sorted((CORE.parent / "bot").glob("*.py")):
        found = graph.setdefault(f"bot.{path.stem}", set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "bot" or node.module.startswith("bot."):
                    found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("bot.")}
    return {module: deps & set(graph) - {module} for module, deps in graph.items()}


def test_no_module_of_bot_imports_itself_round_a_cycle() -> None:
    """A command module imported the app from bot/cli.py, which imported it back to
    register it; the review blocks and a set's blocks imported each other. A module
    that shares pieces with another takes them from a third beneath both."""
    cycle = _cycle(_bot_imports())
    assert cycle == [], "import cycle: " + " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) == []


# A citation of the design names its file, then one or more sections (a comment may wrap
# between them): `docs/design.md §24`, `docs/design.md §7, §9 and §13`.
DESIGN_FILE = "docs/design.md"
_GAP = r"[\s#]+"  # white space, and a comment's `#` where the citation wraps
CITATION = re.compile(
    rf"docs/design\.md{_GAP}§\d+(?:(?:,{_GAP}|{_GAP}and{_GAP}|-)§\d+)*", re.IGNORECASE
)
SECTION_MARK = re.compile(r"§[\d.]*\d|§")
# Every other name for a design file: DESIGN.md (the product contract, kept outside the
# repository, numbered differently), "DESIGN §4".
DESIGN_MENTION = re.compile(r"[\w./-]*\b(?i:design\.md)\b|\bDESIGN\b(?!\.md)")
CITING_FOLDERS = ("core", "bot", "galley", "tests", "bench")


@dataclass(frozen=True)
class CitationProblem:
    path: str
    line: int
    cited: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.cited}: {self.why}"


# Citations in modules that are being rewritten elsewhere, as (path, what is cited): each
# is fixed with its module and then leaves this set (the test says when one is gone).
PENDING_CITATIONS: set[tuple[str, str]] = set()  # (path, cited) awaiting a fix in a busy file


def design_sections(root: Path) -> dict[str, str]:
    """docs/design.md's sections: number -> heading."""
    page = (root / DESIGN_FILE).read_text()
    return dict(re.findall(r"^## (\d+)\. (.+)$", page, re.M))


def citation_problems(path: str, text: str, sections: dict[str, str]) -> list[CitationProblem]:
    """Each citation in `text` that names a design file other than docs/design.md, writes
    a `§` without docs/design.md before it, or names a section docs/design.md lacks."""

    def problem(at: int, cited: str, why: str) -> CitationProblem:
        return CitationProblem(path, text.count("\n", 0, at) + 1, cited, why)

    problems = [
        problem(m.start(), m.group(0), f"not a file in the repository: cite {DESIGN_FILE} §N")
        for m in DESIGN_MENTION.finditer(text)
        if m.group(0) != DESIGN_FILE
    ]
    cited = [m.span() for m in CITATION.finditer(text)]
    for m in SECTION_MARK.finditer(text):
        if not any(start <= m.start() < end for start, end in cited):
            problems.append(problem(m.start(), m.group(0), f"names no file: {DESIGN_FILE} {m[0]}"))
        elif m.group(0)[1:] not in sections:
            problems.append(problem(m.start(), m.group(0), f"{DESIGN_FILE} has no such section"))
    return problems


def test_the_citation_check_finds_every_wrong_citation() -> None:
    sections = {"4": "Claim before you spend", "13": "Model output is untrusted text"}
    text = (
        "# fine (docs/design.md §4) and (docs/design.md §4 and §13), wrapped docs/design.md\n"
        "    # §13; wrong: DESIGN.md §4, (DESIGN §4), docs/design.md §4.5, docs/design.md §9,\n"
        "    # and a bare (§13)\n"
    )
    found = [(p.line, p.cited) for p in citation_problems("m.py", text, sections)]
    wrong_file = [(2, "DESIGN.md"), (2, "DESIGN"), (2, "§4"), (2, "§4")]
    assert found == [*wrong_file, (2, "§4.5"), (2, "§9"), (3, "§13")]


def test_every_citation_names_docs_design_md_and_a_section_it_has() -> None:
    """Code and tests cite the design as `docs/design.md §N`. Two numberings once lived
    side by side (the product contract's DESIGN.md, outside the repository, and
    docs/design.md), so a bare `§13` could mean batch drafting or untrusted text: every `§`
    names its file, that file is the one in the repository, and the section exists."""
    root = CORE.parent
    sections = design_sections(root)
    found = [
        problem
        for folder in CITING_FOLDERS
        for path in sorted((root / folder).rglob("*.py"))
        if path != Path(__file__)
        for problem in citation_problems(str(path.relative_to(root)), path.read_text(), sections)
    ]
    pending = [p for p in found if (p.path, p.cited) in PENDING_CITATIONS]
    wrong = "\n".join(str(p) for p in found if p not in pending)
    assert len(sections) > 20
    assert wrong == "", f"wrong or dangling citations:\n{wrong}"
    gone = PENDING_CITATIONS - {(p.path, p.cited) for p in pending}
    assert not gone, f"fixed: remove from PENDING_CITATIONS: {sorted(gone)}"
