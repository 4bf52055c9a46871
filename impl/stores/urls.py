"""Stores named by URL: ``sqlite:///relative/path``, ``sqlite:////absolute/path`` (a bare path
is SQLite too) and ``postgresql://user@host:port/database[?schema=NAME]``.

PostgreSQL support is an optional install (``agentfsm[postgres]``), imported only when a
``postgresql://`` URL asks for it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from agentfsm.impl.stores.journal import Boundary, JournalError, Store
from agentfsm.impl.stores.leases import LeasingStore
from agentfsm.impl.stores.sqlite import SqliteStore

POSTGRES_SCHEMES = ("postgresql", "postgres")


class StoreURLError(JournalError):
    """The URL names no store agentfsm can open."""


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme in POSTGRES_SCHEMES


def sqlite_path(url: str) -> str:
    """The file a ``sqlite:`` URL (or a bare path) names."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.scheme != "sqlite" and not is_postgres(url):
        raise StoreURLError(f"{url!r}: no store of kind {parts.scheme!r}: a store is a SQLite file (a path, "
                            "sqlite:///relative/path or sqlite:////absolute/path) or postgresql://...")
    if parts.scheme != "sqlite" or parts.netloc or not parts.path.startswith("/") or parts.path == "/":
        raise StoreURLError(f"{url!r}: a SQLite store is named sqlite:///relative/path or sqlite:////absolute/path")
    return parts.path[1:]


def postgres_args(url: str) -> tuple[str, str | None]:
    """The connection URL for libpq and the schema named by ``?schema=`` (which libpq would refuse)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [v for k, v in query if k == "schema"]
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    if len(schemas) > 1 or (schemas and not schemas[0]):
        raise StoreURLError(f"{url!r}: name one schema, as ?schema=NAME")
    return urlunsplit(parts._replace(query=rest)), schemas[0] if schemas else None


def open_leasing_store(url: str, on_boundary: Boundary | None = None) -> LeasingStore:
    """A store several workers can share: PostgreSQL."""
    if not is_postgres(url):
        raise StoreURLError(f"{url!r}: workers share a PostgreSQL store (postgresql://...); SQLite serves "
                            "one process on one machine")
    try:
        from agentfsm.impl.stores.postgres import PostgresStore
    except ImportError:
        raise StoreURLError("the PostgreSQL store needs psycopg: pip install 'agentfsm[postgres]'") from None
    conninfo, schema = postgres_args(url)
    return PostgresStore(conninfo, schema, on_boundary)


def open_store(url: str, on_boundary: Boundary | None = None) -> Store:
    """The journal store a URL names."""
    if is_postgres(url):
        return open_leasing_store(url, on_boundary)
    return SqliteStore(sqlite_path(url), on_boundary)
