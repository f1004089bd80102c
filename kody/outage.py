"""A dependency that is down or full is a coded 503 with ``Retry-After``, never a 500.

Every surface (the API's exception handler, the page middleware, the MCP app, the inbound mail
webhook) hands an exception it did not expect to :func:`unavailable`; when the exception (or
what caused it) says the database or the broker could not be reached, or that this process's
connection pool stayed full for ``KODY_DB_POOL_TIMEOUT`` seconds, it gets back the typed error
to answer with. Anything else is left alone: a bug stays a 500 and is logged as one.

Design note. The driver's exception classes name the cause without a round trip:
a connection that failed or dropped carries no SQLSTATE or one of class 08 / 57P01-57P03, a
server out of connection slots says 53300, and a pool wait that ran out is psycopg_pool's
``PoolTimeout``. Whether that wait was overload or an outage is read from the pools: a pool
that could not grow to its size while a client waited the whole timeout was refused by the
server, whereas one at its size was simply busy.
"""

from __future__ import annotations

from collections.abc import Iterator

from kody.errors import KodyError


class ServiceUnavailable(KodyError):
    code = "service_unavailable"
    status = 503
    message = "The service is briefly unavailable; retry shortly."
    retry_after_seconds = 5


class DatabaseUnavailable(ServiceUnavailable):
    code = "database_unavailable"
    message = "The database cannot be reached right now; retry shortly."


class BrokerUnavailable(ServiceUnavailable):
    code = "broker_unavailable"
    message = "The message broker cannot be reached right now; retry shortly."


class Overloaded(ServiceUnavailable):
    code = "overloaded"
    message = "Too many requests are in progress; retry shortly."
    retry_after_seconds = 2


# SQLSTATEs of a server that is going away or refusing: admin_shutdown, crash_shutdown,
# cannot_connect_now. Class 08 (connection exceptions) is matched by its prefix.
_GOING_AWAY = {"57P01", "57P02", "57P03"}
# Class 53: insufficient resources (too_many_connections is 53300, out of memory 53200, ...).
_FULL_PREFIX = "53"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__


def _pools_full() -> bool:
    """True when some database pool of this process is at its size: its clients wait on each
    other, not on a server that refuses them."""
    from django.db.backends.postgresql.base import DatabaseWrapper

    for pool in list(DatabaseWrapper._connection_pools.values()):
        stats = pool.get_stats()
        if stats.get("pool_size", 0) >= stats.get("pool_max", 0) > 0:
            return True
    return False


def _from_psycopg(exc: BaseException) -> ServiceUnavailable | None:
    import psycopg
    from psycopg_pool import PoolTimeout, TooManyRequests

    if isinstance(exc, PoolTimeout | TooManyRequests):
        return Overloaded() if _pools_full() else DatabaseUnavailable()
    if isinstance(exc, psycopg.InterfaceError):
        return DatabaseUnavailable()  # a closed or broken connection object
    if not isinstance(exc, psycopg.OperationalError):
        return None
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if sqlstate.startswith(_FULL_PREFIX):
        return Overloaded()
    if not sqlstate or sqlstate.startswith("08") or sqlstate in _GOING_AWAY:
        return DatabaseUnavailable()
    return None


def _from_broker(exc: BaseException) -> ServiceUnavailable | None:
    import kombu.exceptions
    import redis.exceptions

    if isinstance(exc, redis.exceptions.ConnectionError | redis.exceptions.TimeoutError):
        return BrokerUnavailable()
    if isinstance(exc, kombu.exceptions.OperationalError):
        return BrokerUnavailable()
    if type(exc).__name__ == "ConnectionInterrupted":  # django_redis wraps the cache's errors
        return BrokerUnavailable()
    return None


def unavailable(exc: BaseException) -> ServiceUnavailable | None:
    """The typed 503 an exception stands for, or None when it is not a dependency outage."""
    if isinstance(exc, ServiceUnavailable):
        return exc
    from django.db import InterfaceError

    for each in _chain(exc):
        found = _from_psycopg(each) or _from_broker(each)
        if found is not None:
            return found
        if isinstance(each, InterfaceError) and each.__cause__ is None:
            # Django's own "connection already closed": the server dropped it earlier.
            return DatabaseUnavailable()
    return None
