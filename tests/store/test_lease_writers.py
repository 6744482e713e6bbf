"""One lease machine (core/store/leases.py): no other module of core/ writes a lease's
columns, whether by assigning a loaded row's attribute, by an UPDATE's values or by a new
row's constructor. A guard naming the holder it read (`guarded_update(…, claimed_by=…)`)
only reads them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "core"
LEASE_COLUMNS = {"claimed_by", "lease_until", "leased_by"}
LEASE_MACHINE = CORE / "store" / "leases.py"
# A post check's claim is its due time moved on by a guarded update of its own
# (core/publishing/post_checks.py), not a lease of the machine's tables.
NOT_LEASED = {CORE / "publishing" / "post_checks.py"}


def _writes_a_column(node: ast.AST) -> bool:
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        flat = [t for target in targets for t in ast.walk(target)]
        return any(isinstance(t, ast.Attribute) and t.attr in LEASE_COLUMNS for t in flat)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        writes = name == "values" or name.endswith("Row")
        return writes and any(k.arg in LEASE_COLUMNS for k in node.keywords)
    return False


def lease_writes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(CORE.parent)}:{node.lineno}"
        for node in ast.walk(tree)
        if _writes_a_column(node)
    ]


def test_only_the_lease_machine_writes_a_leases_columns() -> None:
    writers = [
        hit
        for path in sorted(CORE.rglob("*.py"))
        if "migrations" not in path.parts and path not in {LEASE_MACHINE, *NOT_LEASED}
        for hit in lease_writes(path)
    ]
    assert writers == [], "lease columns written outside leases.py: " + ", ".join(writers)


@pytest.mark.parametrize(
    ("source", "writes"),
    [
        ("row.claimed_by, row.lease_until = None, None", True),
        ("effect.claimed_by = effect.lease_until = None", True),
        ("sa.update(RedraftRow).values(state='claimed', claimed_by=owner)", True),
        ("BatchRow(id=ref, leased_by=owner)", True),
        ("guarded_update(session, row, state=s, claimed_by=as_read(row, 'claimed_by'))", False),
        ("holder = draft.claimed_by", False),
        ("hold(row, RECEIPTS, owner, now + lease)", False),
    ],
)
def test_the_check_finds_a_write_and_only_a_write(
    tmp_path: Path, source: str, writes: bool
) -> None:
    module = tmp_path / "module.py"
    module.write_text(source + "\n")
    found = [n for n in ast.walk(ast.parse(module.read_text())) if _writes_a_column(n)]
    assert bool(found) == writes
