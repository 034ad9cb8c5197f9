"""``runner.create_tables``: on PostgreSQL the read models' tables are made by one script, and what it makes is
what SQLAlchemy's ``create_all`` makes (columns, keys, indexes), once: run again it changes nothing."""

from __future__ import annotations

import sqlalchemy as sa

from agentplaza.projections.registry import all_projections
from agentplaza.projections.runner import create_tables, make_engine, metadata, positions


def shape(engine: sa.Engine) -> dict:
    inspector = sa.inspect(engine)
    out = {}
    for name in sorted(inspector.get_table_names()):
        out[name] = {
            "columns": [(c["name"], str(c["type"]), c["nullable"], str(c.get("default"))) for c in inspector.get_columns(name)],
            "key": inspector.get_pk_constraint(name)["constrained_columns"],
            "indexes": sorted((ix["name"], tuple(ix["column_names"]), bool(ix["unique"]))
                              for ix in inspector.get_indexes(name)),
            "unique": sorted(tuple(u["column_names"]) for u in inspector.get_unique_constraints(name)),
        }
    return out


def test_the_script_makes_what_create_all_makes(database_url, folders, request):
    tables = [positions, *(t for p in all_projections() for t in p.tables)]
    url = database_url or f"sqlite:///{folders.state / 'a.sqlite'}"
    by_script = make_engine(url)
    try:
        create_tables(by_script, tables)
        made = shape(by_script)
        assert set(made) == {t.name for t in tables}
        assert sum(len(t["indexes"]) for t in made.values()) > 20
        create_tables(by_script, tables)  # again: nothing to make, nothing changed
        assert shape(by_script) == made
        if database_url is None:
            return
        by_create_all = make_engine(request.getfixturevalue("postgres").new_database())
        try:
            metadata.create_all(by_create_all, tables=tables)
            assert shape(by_create_all) == made
        finally:
            by_create_all.dispose()
    finally:
        by_script.dispose()


def test_only_the_missing_tables_are_made(database_url, folders):
    tables = [t for p in all_projections() for t in p.tables]
    engine = make_engine(database_url or f"sqlite:///{folders.state / 'b.sqlite'}")
    try:
        create_tables(engine, tables[:10])
        with engine.begin() as conn:
            conn.execute(tables[0].insert().values(**{c.name: _a_value(c) for c in tables[0].columns}))
        create_tables(engine, tables)  # the ten there are kept as they are, their rows with them
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(tables[0])).scalar() == 1
        assert set(sa.inspect(engine).get_table_names()) == {t.name for t in tables}
    finally:
        engine.dispose()


def _a_value(column: sa.Column):
    python = column.type.python_type if not isinstance(column.type, sa.JSON) else dict
    return {int: 1, str: "x", bool: True, dict: {}, float: 1.0}.get(python, None)
