"""The read models' bulk writes (a rebuild's and a catch-up's).  ``runner.insert_many`` stores what
SQLAlchemy's own insert stores: every value read back the same, on SQLite (the driver's executemany) and on
PostgreSQL (one ``COPY`` from ``COPY_FROM`` rows, where a JSON column's dict or list goes as its JSON text).
The values are the awkward ones: escapes, quotes, tabs and newlines, non-ASCII text, an integer past 64 bits
(which the standard library's encoder writes), JSON null, an empty object, a bare string.  ``delete_many``
deletes the rows named, and a row ``Rows.add``ed is inserted without a delete first."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from agentplaza.projections import runner
from agentplaza.projections.framework import Rows
from agentplaza.projections.runner import ReadModels, delete_many, insert_many, make_engine, read_model_url

AWKWARD = [
    {"text": 'a "quoted" \\ back\\slash\ttab\nnewline\r', "n": 1, "nested": {"list": [1, 2.5, None, True]}},
    ["é", "日本語", "\U0001f600", "\\N", "\\.", "\x01"],
    {"big": 2**70, "negative": -(2**63)},
    {},
    [],
    None,
    "a bare string",
    {"copy's markers": "\\N\t\\.\n"},
]


def _tables(meta: sa.MetaData, name: str) -> sa.Table:
    return sa.Table(name, meta, sa.Column("id", sa.Integer, primary_key=True), sa.Column("label", sa.Text),
                    sa.Column("flag", sa.Boolean), sa.Column("doc", sa.JSON, nullable=True))


@pytest.mark.parametrize("rows", [3, runner.COPY_FROM + 36], ids=["few", "copied"])
def test_insert_many_stores_what_sqlalchemys_insert_stores(folders, database_url, rows):
    engine = make_engine(read_model_url(state_dir=folders.state, database_url=database_url))
    meta = sa.MetaData()
    ours, theirs = _tables(meta, "t_insert_many_ours"), _tables(meta, "t_insert_many_theirs")
    meta.create_all(engine)
    values = [{"id": i, "label": f"row {i}\t\\ \"{i}\"", "flag": i % 2 == 0, "doc": AWKWARD[i % len(AWKWARD)]}
              for i in range(rows)]
    try:
        with engine.begin() as conn:
            insert_many(conn, ours, [dict(v) for v in values])
            conn.execute(theirs.insert(), [dict(v) for v in values])
        with engine.connect() as conn:
            got = [dict(r._mapping) for r in conn.execute(sa.select(ours).order_by(ours.c.id))]
            expected = [dict(r._mapping) for r in conn.execute(sa.select(theirs).order_by(theirs.c.id))]
        assert got == expected
        assert got == values
    finally:
        meta.drop_all(engine)
        engine.dispose()


@pytest.mark.parametrize("keys", [1, 2], ids=["one-column key", "two-column key"])
def test_delete_many_deletes_the_rows_named_and_no_other(folders, database_url, keys):
    """``delete_many`` (SQLite: one statement executemany'd; PostgreSQL: IN lists of ``DELETE_BATCH``): more keys
    than a batch, keys with no row, a key that is a prefix of another."""
    engine = make_engine(read_model_url(state_dir=folders.state, database_url=database_url))
    meta = sa.MetaData()
    cols = [sa.Column("a", sa.String(20), primary_key=True)] + (
        [sa.Column("b", sa.BigInteger, primary_key=True)] if keys == 2 else [])
    table = sa.Table("t_delete_many", meta, *cols, sa.Column("v", sa.Text))
    meta.create_all(engine)
    n = runner.DELETE_BATCH + 20
    rows = [{"a": f"k{i}", "b": i, "v": str(i)} if keys == 2 else {"a": f"k{i}", "v": str(i)} for i in range(n)]
    key = (lambda r: (r["a"], r["b"])) if keys == 2 else (lambda r: r["a"])
    doomed = [key(r) for r in rows if int(r["v"]) % 3 == 0] + ([("nobody", 1)] if keys == 2 else ["nobody"])
    try:
        with engine.begin() as conn:
            insert_many(conn, table, rows)
            delete_many(conn, table, doomed)
        with engine.connect() as conn:
            left = {r.a for r in conn.execute(sa.select(table))}
        assert left == {r["a"] for r in rows if int(r["v"]) % 3 != 0}
    finally:
        meta.drop_all(engine)
        engine.dispose()


def test_a_row_added_is_inserted_without_a_delete_and_a_row_put_replaces_the_old(folders, database_url):
    """``Rows.add`` (a key no row has had: a task's ``Created``) is written with no delete before its insert; a
    ``put`` of a row already in SQL replaces it; one ``add``ed then changed in the same page is inserted once."""
    engine = make_engine(read_model_url(state_dir=folders.state, database_url=database_url))
    meta = sa.MetaData()
    table = sa.Table("t_rows_add", meta, sa.Column("id", sa.String(20), primary_key=True), sa.Column("v", sa.Integer))
    meta.create_all(engine)
    deleted: list = []
    real = runner.delete_many

    def counting(conn, t, keys):
        deleted.extend(keys)
        real(conn, t, keys)

    runner.delete_many = counting
    try:
        rows = Rows([table])
        rows.add("t_rows_add", {"id": "a", "v": 1})
        rows.add("t_rows_add", {"id": "b", "v": 1})
        rows.put("t_rows_add", {"id": "b", "v": 2})  # changed in the page that made it
        with engine.begin() as conn:
            ReadModels._write_rows(conn, rows)
        rows.clear_changes()
        assert deleted == []
        rows.put("t_rows_add", {"id": "a", "v": 3})
        rows.add("t_rows_add", {"id": "c", "v": 1})
        with engine.begin() as conn:
            ReadModels._write_rows(conn, rows)
        rows.clear_changes()
        assert deleted == ["a"]
        with engine.connect() as conn:
            assert dict(conn.execute(sa.select(table.c.id, table.c.v)).all()) == {"a": 3, "b": 2, "c": 1}
    finally:
        runner.delete_many = real
        meta.drop_all(engine)
        engine.dispose()
