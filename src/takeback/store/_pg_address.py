"""Store layer: a PostgreSQL store's address, a secret parsed once into an object.

``postgresql://[user[:password]@][host][:port][/dbname][?param=value&...][#key]`` (or
``postgres://``). The address is parsed here, once; what is shown of it anywhere (its
``repr``, ``str``, errors, the store's ``url``, a local folder's name) never holds the
password. The driver is handed the address without its password, the password apart
(:meth:`StoreAddress.connect_args`), so that the driver's own errors, which quote what
they failed to parse, cannot quote it either. A child process is handed the address
through its environment (:meth:`StoreAddress.reveal`), never its argv.

An address without a password is the recommended form: libpq then finds it the ways it
knows (``PGPASSWORD``, ``~/.pgpass`` or ``PGPASSFILE``, ``service=`` in
``pg_service.conf``), and every other libpq parameter (``sslmode``, ...) is passed on.

Two parameters bound every wait on the database: ``connect_timeout`` (libpq's, seconds;
default :data:`CONNECT_TIMEOUT`) and ``statement_timeout`` (takeback's, seconds, 0 for
none; default :data:`STATEMENT_TIMEOUT`), which the server applies to each statement.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ..errors import StoreError

SCHEMES = ("postgresql://", "postgres://")
#: seconds a connection may take to be made (and answered) before the command gives up
CONNECT_TIMEOUT = 5
#: seconds one statement may run on the server before the server cancels it: a statement's
#: own work takes milliseconds, but it may wait behind another server's transaction (an
#: object row being inserted), and it must still end well inside a hook call's 30 s bound
STATEMENT_TIMEOUT = 15
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _decode(text: str, what: str) -> str:
    """Percent-decode ``text`` strictly; refuse (without quoting it) what is not valid."""
    if _PERCENT.search(text):
        raise StoreError(
            f"the {what} in the store address has a '%' that starts no %XX code: "
            "write a '%' in it as %25",
            path="postgresql",
        )
    raw = re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)
    try:
        return raw.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise StoreError(
            f"the {what} in the store address is not UTF-8 once decoded", path="postgresql"
        ) from None


def _seconds(value: str, name: str) -> float:
    try:
        got = float(value)
    except ValueError:
        raise StoreError(
            f"the store address's {name} is not a number of seconds", path="postgresql"
        ) from None
    if got < 0:
        raise StoreError(f"the store address's {name} is negative", path="postgresql")
    return got


class StoreAddress:
    """A PostgreSQL store's address: the database, its parameters, a password kept apart.

    Args:
        text: ``postgresql://...`` as given (``--store``, ``TAKEBACK_STORE``).

    Raises:
        StoreError: the address cannot be parsed (the message never quotes it).
    """

    __slots__ = (
        "_params",
        "_password",
        "_text",
        "connect_timeout",
        "dbname",
        "host",
        "key",
        "port",
        "statement_timeout",
        "user",
    )

    def __init__(self, text: str) -> None:
        if not text.startswith(SCHEMES):
            raise StoreError("a store address starts with postgresql://", path="postgresql")
        self._text = text
        scheme, _sep, rest = text.partition("://")
        rest, _hash, key = rest.partition("#")
        #: the workspace's key in the database (None: the workspace's root path)
        self.key: str | None = key or None
        rest, _q, query = rest.partition("?")
        # The user information ends at the last '@': a password may hold any character.
        userinfo, at, hostpart = rest.rpartition("@")
        if not at:
            userinfo, hostpart = "", rest
        user, colon, password = userinfo.partition(":")
        self._password: str | None = _decode(password, "password") if colon else None
        self.user: str | None = _decode(user, "user name") or None
        hostpart, _slash, dbname = hostpart.partition("/")
        self.dbname: str | None = _decode(dbname, "database name") or None
        params: dict[str, str] = {}
        for pair in query.split("&") if query else ():
            name, eq, value = pair.partition("=")
            if not eq:
                raise StoreError(
                    "a parameter of the store address has no '=' (name=value)", path="postgresql"
                )
            name = _decode(name, "parameter name")
            params[name] = _decode(value, f"parameter {name!r}")
        if "password" in params:
            self._password = params.pop("password")
        self.connect_timeout = _seconds(
            params.pop("connect_timeout", str(CONNECT_TIMEOUT)), "connect_timeout"
        )
        self.statement_timeout = _seconds(
            params.pop("statement_timeout", str(STATEMENT_TIMEOUT)), "statement_timeout"
        )
        self._params = params
        self.host, self.port = self._first_host(hostpart, params)

    @staticmethod
    def _first_host(hostpart: str, params: dict[str, str]) -> tuple[str, str]:
        """Return the first host and port the address names (for messages and keys)."""
        first = hostpart.split(",")[0]
        if first.startswith("["):
            close = first.find("]")
            if close < 0:
                raise StoreError(
                    "the store address's host has a '[' with no ']' after it", path="postgresql"
                )
            host, port = first[1:close], first[close + 1 :].lstrip(":")
        else:
            host, _colon, port = first.partition(":")
        host = _decode(host, "host") or params.get("host", "").split(",")[0]
        if not host and "service" in params:
            return f"service={params['service']}", ""  # pg_service.conf says where
        host = host or "localhost"
        port = port or params.get("port", "").split(",")[0] or "5432"
        if not port.isdigit():
            raise StoreError("the store address's port is not a number", path="postgresql")
        return host, port

    # -- what may be shown -----------------------------------------------------------

    @property
    def where(self) -> str:
        """``HOST:PORT`` of the (first) server (or ``service=NAME``), for messages."""
        return f"{self.host}:{self.port}" if self.port else self.host

    @property
    def shown(self) -> str:
        """The database's address without the password, the key or any parameter."""
        user = f"{self.user}{':***' if self._password is not None else ''}@" if self.user else ""
        if not user and self._password is not None:
            user = ":***@"
        if not self.port:
            return f"postgresql://{user}/{self.dbname or ''}?{self.host}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"postgresql://{user}{host}:{self.port}/{self.dbname or ''}"

    def local_name(self) -> str:
        """Return a short digest of the database this address names (for local folders).

        The server, its port, the database and the key: neither the user nor the password,
        so the same history reached as another user keeps one local folder.
        """
        ident = "\0".join((self.host, self.port, self.dbname or "", self.key or ""))
        return hashlib.sha256(ident.encode()).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"StoreAddress({str(self)!r})"

    def __str__(self) -> str:
        return self.shown + (f"#{self.key}" if self.key is not None else "")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoreAddress) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    def with_key(self, key: str) -> StoreAddress:
        """Return the same address naming the workspace ``key``."""
        return StoreAddress(f"{self._text.partition('#')[0]}#{key}")

    # -- what only the driver and a child process get -----------------------------------

    def connect_args(self) -> tuple[str, dict[str, Any]]:
        """Return (conninfo without the password, keyword parameters) for the driver.

        The parameters hold the password (when the address has one), the connect timeout
        and the statement timeout (as a server option, so no statement is spent on it).
        """
        host, _sep, _rest = self._text.partition("://")[2].partition("#")[0].partition("?")
        hostpart = host.rpartition("@")[2]
        kwargs: dict[str, Any] = {"application_name": "takeback", **self._params}
        if self.user:
            kwargs["user"] = self.user
        if self._password is not None:
            kwargs["password"] = self._password
        kwargs["connect_timeout"] = str(max(2, round(self.connect_timeout)))
        if self.statement_timeout:
            ms = int(self.statement_timeout * 1000)
            kwargs["options"] = f"{kwargs.get('options', '')} -c statement_timeout={ms}".strip()
        return f"postgresql://{hostpart}", kwargs

    def reveal(self) -> str:
        """Return the address as given, password and all: for a child's environment only."""
        return self._text


def is_address(spec: object) -> bool:
    """Return whether a ``--store`` value names a PostgreSQL database, not a folder."""
    return isinstance(spec, StoreAddress) or (isinstance(spec, str) and spec.startswith(SCHEMES))


def address_of(spec: str | StoreAddress) -> StoreAddress:
    """Return the address a ``--store`` value names (parsing it when it is text)."""
    return spec if isinstance(spec, StoreAddress) else StoreAddress(spec)
