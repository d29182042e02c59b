"""Integrations layer: the local web server behind ``takeback ui``.

The standard library's ``ThreadingHTTPServer``: the page is a few static files and a
small JSON API (:mod:`._ui_api`), live updates are one long response per open page
(Server-Sent Events), and a thread per request needs no event loop, starts at once and
stops with the process.

Safety, checked on every request before anything is read or done:

- it listens on 127.0.0.1 only;
- a random token (as Jupyter's) must come with the request: in the address
  (``?token=``), or in the ``X-Takeback-Token`` header; a take-back (POST) takes it in
  the header only, which a form on another site cannot send, and only as JSON;
- the Host header must name this server (127.0.0.1 or localhost, this port), so a
  name that another site makes point at 127.0.0.1 (DNS rebinding) gets nothing;
- an Origin header, when the browser sends one, must be this server's, and a request
  the browser marks ``Sec-Fetch-Site: cross-site`` is refused.

Anything else is answered 403 with nothing read or changed. Responses carry a strict
Content-Security-Policy (nothing from elsewhere, no framing) and no referrer.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import time
import traceback
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import ConflictError, TakebackError, UsageError
from ._ui_api import OPS, UiApi, UiConfig

HOST = "127.0.0.1"
#: how often a live page's stream looks at the store for something new (seconds)
POLL_SECONDS = 0.25
#: a comment line keeps an idle stream open through proxies and shows a dead one
KEEPALIVE_SECONDS = 15.0

_STATIC = {
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
}
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
#: files in the store whose change means the history changed
_WATCHED = ("events.jsonl", "meta.db", "meta.db-wal")


def _static(name: str) -> bytes:
    return (
        resources.files(__package__ or "takeback.integrations")
        .joinpath("ui_static", name)
        .read_bytes()
    )


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A page that went away (a reload, a closed tab) is no error; others: one line."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return
        print(f"takeback ui: a request failed: {type(error).__name__}: {error}", file=sys.stderr)


class UiServer:
    """The page's server: bound to 127.0.0.1, one token, until :meth:`stop`.

    Args:
        config: the workspace, store and session to show.
        port: the port (0: any free one).
    """

    def __init__(self, config: UiConfig, *, port: int = 0) -> None:
        self.api = UiApi(config)
        self.token = secrets.token_urlsafe(24)
        self._stopping = threading.Event()
        self.httpd = _HTTPServer((HOST, port), _handler_for(self))
        self.port = int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The page's address, token included."""
        return f"http://{HOST}:{self.port}/?token={self.token}"

    @property
    def allowed_hosts(self) -> set[str]:
        """The Host header values this server answers."""
        return {f"{HOST}:{self.port}", f"localhost:{self.port}"}

    @property
    def allowed_origins(self) -> set[str]:
        """The Origin header values this server answers."""
        return {f"http://{h}" for h in self.allowed_hosts}

    def serve_forever(self) -> None:
        """Serve until :meth:`stop` (from another thread or a signal handler)."""
        try:
            self.httpd.serve_forever(poll_interval=0.2)
        finally:
            self._stopping.set()

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving (open streams end within a poll) and close the socket."""
        self._stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def stopping(self) -> bool:
        """Whether the server is stopping (streams end)."""
        return self._stopping.is_set()


def _handler_for(server: UiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        ui = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    ui: UiServer
    server_version = "takeback-ui"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the base's names
        """Log nothing: the terminal shows the address and errors only."""

    # -- the checks ----------------------------------------------------------------------

    def _allowed(self, *, post: bool) -> bool:
        ui = self.ui
        if self.headers.get("Host") not in ui.allowed_hosts:
            return False
        origin = self.headers.get("Origin")
        if origin is not None and origin not in ui.allowed_origins:
            return False
        if self.headers.get("Sec-Fetch-Site") == "cross-site":
            return False
        header = self.headers.get("X-Takeback-Token") or ""
        given = header
        if not post and not given:
            given = (parse_qs(urlsplit(self.path).query).get("token") or [""])[0]
        if not given or not secrets.compare_digest(given.encode(), ui.token.encode()):
            return False
        if post:
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            return kind == "application/json"
        return True

    def _refuse(self) -> None:
        self._send(403, b"forbidden\n", "text/plain; charset=utf-8")

    # -- answers -------------------------------------------------------------------------

    def _send(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", _CSP)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, doc: dict[str, Any]) -> None:
        self._send(code, json.dumps(doc).encode(), "application/json")

    def _answer(self, fn: Callable[[], dict[str, Any]]) -> None:
        try:
            doc = fn()
        except ConflictError as e:
            self._json(409, e.to_json())
        except TakebackError as e:
            self._json(400 if e.exit_code == 2 else 500, e.to_json())
        except OSError as e:
            message = f"{e.strerror or e}: {e.filename or ''}".rstrip(": ")
            self._json(500, {"error": type(e).__name__, "message": message, "exit_code": 1})
        except Exception as e:  # noqa: BLE001 - one request's failure is that request's
            traceback.print_exc(file=sys.stderr)
            message = str(e) or type(e).__name__
            self._json(500, {"error": type(e).__name__, "message": message, "exit_code": 1})
        else:
            self._json(200, doc)

    def do_GET(self) -> None:  # the base's name
        """Answer the page, its files, the API's questions and the live stream."""
        if not self._allowed(post=False):
            self._refuse()
            return
        url = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        api = self.ui.api
        if url.path == "/":
            page = _static("index.html").replace(b"__TOKEN__", self.ui.token.encode())
            self._send(200, page, "text/html; charset=utf-8")
        elif url.path in _STATIC:
            name, kind = _STATIC[url.path]
            self._send(200, _static(name), kind)
        elif url.path == "/api/timeline":
            self._answer(lambda: api.timeline(q.get("session")))
        elif url.path == "/api/turn":
            self._answer(lambda: api.turn_diff(q.get("session"), _int(q, "turn"), q.get("path")))
        elif url.path == "/api/step":
            self._answer(lambda: api.step_points(q.get("session"), _int(q, "step")))
        elif url.path == "/api/diff":
            self._answer(
                lambda: api.diff(q.get("session"), q.get("from") or "", q.get("to"), q.get("path"))
            )
        elif url.path == "/api/show":
            self._answer(lambda: api.show(q.get("session"), q.get("ref", ""), q.get("path", "")))
        elif url.path == "/api/events":
            self._stream()
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def do_POST(self) -> None:  # the base's name
        """Plan (``/api/plan``) or do (``/api/apply``) one take-back."""
        if not self._allowed(post=True):
            self._refuse()
            return
        url = urlsplit(self.path)
        if url.path not in ("/api/plan", "/api/apply"):
            self._send(404, b"not found\n", "text/plain; charset=utf-8")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            args = json.loads(self.rfile.read(min(length, 1 << 20)) or b"{}")
        except ValueError:
            args = None
        if not isinstance(args, dict) or args.get("op") not in OPS:
            self._json(400, {"error": "UsageError", "message": "bad request", "exit_code": 2})
            return
        dry = url.path == "/api/plan"
        self._answer(lambda: self.ui.api.take_back(str(args["op"]), args, dry_run=dry))

    # -- live ----------------------------------------------------------------------------

    def _stream(self) -> None:
        """Send an ``update`` event each time the store changes, until the page goes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Security-Policy", _CSP)
        self.end_headers()
        self.close_connection = True
        store = self.ui.api.store_path()
        last: object = None
        quiet = time.monotonic()
        try:
            # A database store says when its history changes (LISTEN/NOTIFY); a folder
            # store's files are looked at.
            listener = self.ui.api.listener()
        except TakebackError:
            listener = None
        try:
            self.wfile.write(b"retry: 1000\n\n")
            while not self.ui.stopping():
                if listener is None:
                    mark: object = _mark(store)
                else:
                    heard = last is not None and listener.wait(POLL_SECONDS)
                    mark = time.monotonic_ns() if heard or last is None else last
                if mark != last:
                    self.wfile.write(b"event: update\ndata: %d\n\n" % time.time_ns())
                    self.wfile.flush()
                    last = mark
                    quiet = time.monotonic()
                elif time.monotonic() - quiet > KEEPALIVE_SECONDS:
                    self.wfile.write(b": alive\n\n")
                    self.wfile.flush()
                    quiet = time.monotonic()
                if listener is None:
                    time.sleep(POLL_SECONDS)
        except (OSError, TakebackError):
            return  # the page went away, or the database did
        finally:
            if listener is not None:
                listener.close()


def _mark(store: str) -> tuple[tuple[int, int], ...]:
    """Sizes and times of the store's files that change with the history (cheap)."""
    out = []
    for name in _WATCHED:
        try:
            st = os.stat(os.path.join(store, name))
        except OSError:
            out.append((-1, -1))
        else:
            out.append((st.st_size, st.st_mtime_ns))
    return tuple(out)


def _int(q: dict[str, str], key: str) -> int:
    try:
        return int(q[key])
    except (KeyError, ValueError):
        raise UsageError(f"missing or bad {key!r}") from None
