"""Floors: what the same driver, or the same interpreter, does in the same run with bare
work, so a bench can hold a goal as a ratio to it.

A floor lap lasts about as long as the operation it is the floor of (`batch` bare
operations, timed together and divided): a 0.05 ms statement fits in a time slice
and is rarely preempted on a busy machine, while a 5 ms draft is, so timing them one by
one would make the ratio swing with the load rather than hold still.

This machine's speed varies from day to day (the same code ran 2 to 4 times slower on
some days than on others), so a figure in milliseconds says as much about the machine
as about Galley. A floor is measured beside the figure, in the same process and
minutes, and the goal is the figure divided by it:

- `bare_transactions`: the driver alone (the DB-API connection under the engine, with
  Galley's own connection settings) running a number of transactions of bare one-row
  statements on a scratch table. What a draft costs above it is Galley's work.
- `bare_read`: the driver alone running one SELECT and fetching every row.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

FLOOR_TABLE = "bench_floor"


def create_floor_table(engine: sa.Engine) -> None:
    key = "INTEGER PRIMARY KEY" if engine.dialect.name == "sqlite" else "SERIAL PRIMARY KEY"
    with engine.begin() as connection:
        connection.exec_driver_sql(
            f"CREATE TABLE IF NOT EXISTS {FLOOR_TABLE} (id {key}, note TEXT)"
        )


def matched_batch(operation_ms: float, lap: list[float]) -> int:
    """How many bare operations of `lap` (one each) take as long as the operation."""
    return max(1, min(1000, round(operation_ms / max(statistics.median(lap), 1e-6))))


def bare_transactions(
    engine: sa.Engine, transactions: int, statements: int, repeats: int, batch: int = 1
) -> list[float]:
    """`repeats` laps, each `transactions` transactions sending `statements` statements in
    all (BEGIN and COMMIT included on SQLite, COMMIT on PostgreSQL, as the draft's are
    counted): one-row INSERTs and primary-key SELECTs in turn. ms per draft's worth, each
    lap doing `batch` of them."""
    sqlite = engine.dialect.name == "sqlite"
    fences = 2 if sqlite else 1  # BEGIN IMMEDIATE and COMMIT; psycopg's BEGIN travels free
    work = max(transactions, statements - fences * transactions)
    shares = [
        work // transactions + (1 if t < work % transactions else 0) for t in range(transactions)
    ]
    marker = "?" if sqlite else "%s"
    insert = f"INSERT INTO {FLOOR_TABLE} (note) VALUES ({marker})"
    select = f"SELECT note FROM {FLOOR_TABLE} WHERE id = {marker}"
    raw: Any = engine.raw_connection()
    try:
        driver = raw.driver_connection
        laps = []
        for _ in range(repeats):
            started = time.perf_counter()
            for share in shares * batch:
                cursor = driver.cursor()
                if sqlite:
                    cursor.execute("BEGIN IMMEDIATE")
                for n in range(share):
                    if n % 2 == 0:
                        cursor.execute(insert, ("floor",))
                    else:
                        cursor.execute(select, (n,))
                        cursor.fetchall()
                driver.commit() if not sqlite else cursor.execute("COMMIT")
                cursor.close()
            laps.append((time.perf_counter() - started) * 1000 / batch)
        return laps
    finally:
        raw.close()


def bare_read(
    engine: sa.Engine, sql: str, params: tuple[Any, ...], repeats: int, batch: int = 1
) -> list[float]:
    """`repeats` laps of `batch` bare SELECTs through the driver, every row fetched. ms
    per SELECT."""
    return _laps(engine, sql, params, repeats, batch, work=None)


def bare_read_then(
    engine: sa.Engine,
    sql: str,
    params: tuple[Any, ...],
    work: Callable[[int, list[Any]], object],
    repeats: int,
) -> list[float]:
    """`repeats` laps of one bare SELECT through the driver, every row fetched, then
    `work(lap, rows)`: the floor of an operation whose cost is mostly what it does with
    what it read (scoring texts, say), where a read alone would track the disk and the
    driver but not the CPU. ms per lap."""
    return _laps(engine, sql, params, repeats, 1, work=work)


def _laps(
    engine: sa.Engine,
    sql: str,
    params: tuple[Any, ...],
    repeats: int,
    batch: int,
    work: Callable[[int, list[Any]], object] | None,
) -> list[float]:
    if engine.dialect.name != "sqlite":
        sql = sql.replace("?", "%s")
    raw: Any = engine.raw_connection()
    try:
        driver = raw.driver_connection
        laps = []
        for lap in range(repeats):
            started = time.perf_counter()
            for _ in range(batch):
                cursor = driver.cursor()
                cursor.execute(sql, params)
                rows = cursor.fetchall()
                cursor.close()
                driver.commit()
                if work is not None:
                    work(lap, rows)
            laps.append((time.perf_counter() - started) * 1000 / batch)
        return laps
    finally:
        raw.close()


def ratio(figure: float, floor: list[float]) -> float:
    return figure / statistics.median(floor)
