"""CLI layer: ``takeback service start|stop|status|run``: the workspace's watching service.

With it running, a snapshot lists only the folders it saw change; without it (or at any
doubt) a snapshot scans in full. It is never needed for correctness. ``run`` is the
service itself in the foreground (what ``start`` runs detached).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._app import Ctx

HELP = "start, stop or show the watching service that makes snapshots cost what changed"


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"not a positive number of seconds: {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add this command's arguments."""
    p.add_argument(
        "action",
        choices=["start", "stop", "status", "run"],
        help="start it detached, stop it, show it, or run it in the foreground",
    )
    p.add_argument(
        "--wait",
        type=_seconds,
        default=10.0,
        metavar="S",
        help="start: how long to wait for it to answer (default 10)",
    )
    p.add_argument(
        "--quiet-exit",
        type=_seconds,
        default=None,
        metavar="S",
        help="exit after this many seconds without a snapshot (default 1800)",
    )
    p.add_argument(
        "--idle-full",
        type=_seconds,
        default=None,
        metavar="S",
        help="a snapshot after this many idle seconds scans in full (default 300)",
    )
    p.add_argument(
        "--audit-after",
        type=_seconds,
        default=None,
        metavar="S",
        help="audit itself against a full scan after this many idle seconds (default 60)",
    )
    p.add_argument(
        "--audit-every",
        type=_seconds,
        default=None,
        metavar="S",
        help="audit itself at most this often, in seconds (default 600)",
    )
    p.add_argument(
        "--full-every",
        type=_seconds,
        default=None,
        metavar="S",
        help="scan in full at least this often, in seconds (default 1800)",
    )


def _options(ctx: Ctx) -> list[str]:
    out: list[str] = []
    for flag, value in (
        ("--quiet-exit", ctx.args.quiet_exit),
        ("--idle-full", ctx.args.idle_full),
        ("--full-every", ctx.args.full_every),
        ("--audit-after", ctx.args.audit_after),
        ("--audit-every", ctx.args.audit_every),
    ):
        if value is not None:
            out += [flag, repr(value)]
    return out


def run(ctx: Ctx) -> int:
    """Start, stop, show or run the service."""
    import os

    from ..errors import StoreError, UsageError
    from ..integrations import _service

    action = ctx.args.action
    ws = ctx.workspace()
    if ws.store_url is not None:
        # The service watches for a folder store's scan cache; a database's workspace
        # scans in full (README, "PostgreSQL"), so there is nothing to start or stop.
        if action in ("start", "run"):
            raise UsageError(
                "the watching service works with a folder store only; with a PostgreSQL "
                "store, snapshots scan in full"
            )
        none = {"running": False, "pid": None, "reason": "a PostgreSQL store: no service"}
        if ctx.json:
            ctx.emit_json({"stopped": False, "pid": None} if action == "stop" else none)
        else:
            ctx.out("no service with a PostgreSQL store: snapshots scan in full")
        return 0
    if action in ("start", "run"):
        why = _service.check_folders(ws.store_path)
        if why:
            raise StoreError(f"the service will not run: {why}", path=ws.store_path)
    if action == "run":
        from ..integrations._service import (
            AUDIT_AFTER,
            AUDIT_EVERY,
            FULL_EVERY,
            IDLE_FULL,
            QUIET_EXIT,
        )
        from ._served import run_call

        return _service.serve(
            ws.root,
            ws.store_path,
            quiet=ctx.args.quiet_exit or QUIET_EXIT,
            idle_full=ctx.args.idle_full or IDLE_FULL,
            full_every=ctx.args.full_every or FULL_EVERY,
            faults=bool(os.environ.get(_service.FAULTS_ENV)),
            runner=run_call,
            audit_after=ctx.args.audit_after or AUDIT_AFTER,
            audit_every=ctx.args.audit_every or AUDIT_EVERY,
        )
    if action == "start":
        ws.open_store(create=True)
        before = _service.running_pid(ws.store_path)
        pid = _service.start(ws.root, ws.store_path, wait=ctx.args.wait, options=_options(ctx))
        if pid is None:
            raise UsageError(
                f"the service did not answer within {ctx.args.wait:g} s "
                f"(see {_service.log_path(ws.store_path)})"
            )
        doc = _service.status(ws.store_path)
        if ctx.json:
            ctx.emit_json({**doc, "started": before is None})
        elif before is None:
            ctx.out(f"service started (pid {pid}), watching {doc.get('watches', '?')} folders")
        else:
            ctx.out(f"service already running (pid {pid})")
        return 0
    if not ws.has_store():
        if ctx.json:
            doc = {"running": False, "pid": None, "reason": "no store here"}
            ctx.emit_json({"stopped": False, "pid": None} if action == "stop" else doc)
        else:
            ctx.out("no service is running (nothing is recorded here)")
        return 0
    if action == "stop":
        pid = _service.stop(ws.store_path)
        if ctx.json:
            ctx.emit_json({"stopped": pid is not None, "pid": pid})
        else:
            ctx.out(f"service stopped (pid {pid})" if pid is not None else "no service is running")
        return 0
    doc = _service.status(ws.store_path)
    if ctx.json:
        ctx.emit_json(doc)
        return 0
    if not doc["running"]:
        ctx.out("no service is running: snapshots scan in full")
    elif not doc.get("answering"):
        ctx.out(f"service (pid {doc['pid']}) is not answering: {doc.get('reason')}")
    else:
        mib = doc.get("rss_bytes", 0) / (1 << 20)
        ctx.out(
            f"service running (pid {doc['pid']}): {doc['watches']} watches, "
            f"{mib:.1f} MiB, {doc['questions']} snapshot(s) answered, "
            f"idle {doc['idle_s']:.0f} s"
        )
        if doc.get("degraded"):
            ctx.out(f"snapshots scan in full: {doc['degraded']}")
        if doc.get("unwatched"):
            ctx.out(
                f"{doc['unwatched']} folder(s) have no watch (the inotify watch limit was "
                "reached): every snapshot lists them and all below them; raise the limit "
                "with: sysctl fs.inotify.max_user_watches=N"
            )
        if doc.get("audits") or doc.get("divergences"):
            ctx.out(
                f"audits against a full scan: {doc['audits']}, divergences: {doc['divergences']}"
            )
    return 0
