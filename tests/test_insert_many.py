"""``runner.insert_many``, the read models' bulk insert (a rebuild's and a catch-up's writes), stores what
SQLAlchemy's own insert stores: every value read back the same, on SQLite (the driver's executemany) and on
PostgreSQL (one ``COPY`` from ``COPY_FROM`` rows, where a JSON column's dict or list goes as its JSON text).
The values are the awkward ones: escapes, quotes, tabs and newlines, non-ASCII text, an integer past 64 bits
(which the standard library's encoder writes), JSON null, an empty object, a bare string."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from agentplaza.projections import runner
from agentplaza.projections.runner import insert_many, make_engine, read_model_url

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
