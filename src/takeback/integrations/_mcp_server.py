"""Integrations layer: the MCP server behind ``takeback mcp``: takeback's operations as tools.

Served over stdio with the official ``mcp`` SDK, which this module imports (about a
second): only ``takeback mcp`` loads it. Tools return structured results (the same keys
as the command line's ``--json``); a takeback error is a tool error whose text is the
command line's message and whose structured content is the command line's ``--json``
error document. A name that is not UTF-8 (held as surrogate escapes) is sent with each
undecodable byte written as backslash, ``x`` and two hex digits: the protocol is UTF-8
JSON, and a result that cannot be encoded would turn a finished write into a reported
failure. Nothing but the protocol goes to stdout (the SDK moves the process's own stdout
to stderr while it serves).

Each call opens the workspace afresh and calls are taken one at a time: the SDK runs
tools in worker threads, and a store connection belongs to the thread that opened it.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, cast

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from .. import __version__, summary
from ..errors import TakebackError
from ._per_call import PerCall

if TYPE_CHECKING:
    from .. import Session, StoreAddress, Workspace

P = ParamSpec("P")

#: The tools' ``merge`` argument: false (refuse a file changed since), true (merge it), or
#: "markers" (merge, writing conflict markers where both changed the same lines).
Merge = bool | Literal["markers"]

#: a diff's patch is cut here (an agent's context is not the place for a huge patch)
MAX_PATCH_CHARS = 200_000

INSTRUCTIONS = """\
takeback records what happens to this workspace (sessions, turns, steps, snapshots) and
takes any part of it back. Call `checkpoint` before a risky change; `history` lists
sessions, turns and steps; `changes` and `diff` show what changed; `undo_file`,
`undo_turn`, `redo` and `rewind` take changes back (every one of them takes a snapshot
first, so it can itself be taken back). A file edited since your change (by a person) is
a conflict: `merge: true` takes back only your hunks and keeps their edits. Refs: a
snapshot id (or a prefix of 4+ hex digits), `start` (the session's baseline), a step
number `N` (the state before step N), or `turn:N` (the state before turn N). `rewind`
only plans unless `dry_run` is false. Without `session`, a tool uses the server's
session, or else the newest one."""


@dataclass(frozen=True)
class ServerConfig:
    """Where the server works: the workspace, its store, and the session by default."""

    root: str
    store: str | StoreAddress | None = None
    session: str | None = None
    max_file_bytes: int | None = None


def _wire(value: Any) -> Any:
    r"""Return ``value`` with every string encodable as UTF-8 (keys of dicts too).

    A lone surrogate from ``os.fsdecode`` (byte 0xNN) becomes the text ``\xNN``, any
    other lone surrogate ``\uNNNN``; everything else is unchanged.
    """
    if isinstance(value, str):
        return _SURROGATE.sub(_escape, value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {_wire(k): _wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_wire(v) for v in value]
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def _error_result(e: BaseException) -> CallToolResult:
    if isinstance(e, TakebackError):
        doc = e.to_json()
        message = e.message
    else:
        assert isinstance(e, OSError)
        message = f"{e.strerror or e}: {e.filename or ''}".rstrip(": ")
        doc = {"error": type(e).__name__, "message": message, "exit_code": 1}
    return CallToolResult(
        content=[TextContent(type="text", text=_wire(message))],
        structured_content=_wire(doc),
        is_error=True,
    )


def _tool_errors(fn: Callable[P, dict[str, Any]]) -> Callable[P, dict[str, Any]]:
    """Turn takeback's errors (and OS errors) into tool errors with the CLI's messages.

    The SDK passes a ``CallToolResult`` returned by a tool through unchanged, so the text
    is exactly the message, without the SDK's ``Error executing tool`` prefix. The
    docstring, which the SDK sends as the tool's description as it is, loses the
    indentation it has in the source.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except (TakebackError, OSError) as e:
            return cast(dict[str, Any], _error_result(e))

    wrapper.__doc__ = inspect.cleandoc(fn.__doc__ or "")
    return wrapper


def _encodable(fn: Callable[P, dict[str, Any]]) -> Callable[P, dict[str, Any]]:
    """Make a tool's result encodable (see :func:`_wire`) before the SDK serializes it."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        return cast(dict[str, Any], _wire(fn(*args, **kwargs)))

    return wrapper


class _Tools:
    """The operations, each on a workspace opened for the call."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._calls = PerCall(config.root, config.store, config.max_file_bytes)

    def workspace(self) -> AbstractContextManager[Workspace]:
        return self._calls.workspace()

    def session(self, ws: Workspace, name: str | None) -> Session:
        if name:
            return ws.session(name)
        if self.config.session:
            return ws.session(self.config.session)
        return ws.session(ws.active_session())

    @staticmethod
    def rel_paths(ws: Workspace, paths: list[str] | None) -> list[str] | None:
        if not paths:
            return None
        return [ws.rel(p) for p in paths]

    # -- the tools -------------------------------------------------------------------

    @_encodable
    def checkpoint(self, label: str, session: str | None) -> dict[str, Any]:
        with self.workspace() as ws:
            s = self.session(ws, session)
            failed: list[str] = []
            ws.on_event(
                lambda ev: (
                    failed.append(str(ev.get("reason")))
                    if ev.get("event") == "snapshot.failed"
                    else None
                )
            )
            turn = s.current_turn()
            text = label or "checkpoint"
            step = turn.step(label=text) if turn is not None else s.step(label=text)
            step.begin()
            step.finish()
            if step.before is None:
                raise TakebackError("snapshot failed: " + ("; ".join(failed) or "unknown"))
            snap = step.before
            return {
                **snap.to_json(),
                "session": s.name,
                "step": step.n,
                "turn": step.turn,
                "label": text,
                "ref": str(step.n),
            }

    @_encodable
    def history(self, session: str | None, limit: int) -> dict[str, Any]:
        limit = max(1, limit)
        with self.workspace() as ws:
            sessions = ws.sessions()
            s = self.session(ws, session)
            turns = s.turns()
            steps = s.steps()
            snaps = ws.log(s.name, limit=limit)
            return {
                "root": ws.root,
                "session": s.name,
                "sessions": [
                    {"name": i.name, "baseline": i.baseline, "created_at": i.created_at}
                    for i in sessions
                ],
                "turns": [
                    {
                        "n": t.n,
                        "label": t.label,
                        "state": t.state,
                        "before": t.before,
                        "files": len(t.changes),
                        "added": sum(c.added for c in t.changes),
                        "removed": sum(c.removed for c in t.changes),
                    }
                    for t in turns[-limit:]
                ],
                "total_turns": len(turns),
                "steps": [
                    {
                        "n": st.n,
                        "turn": st.turn,
                        "label": st.label,
                        "before": st.before,
                        "after": st.after,
                        "exit_code": st.exit_code,
                    }
                    for st in steps[-limit:]
                ],
                "total_steps": len(steps),
                "snapshots": [i.to_json() for i in snaps],
            }

    @_encodable
    def changes(self, turn: int | None, session: str | None) -> dict[str, Any]:
        with self.workspace() as ws:
            return self.session(ws, session).ended_turn(turn).to_json()

    @_encodable
    def diff(
        self,
        from_ref: str | None,
        to_ref: str | None,
        paths: list[str] | None,
        stat_only: bool,
        session: str | None,
    ) -> dict[str, Any]:
        with self.workspace() as ws:
            s = self.session(ws, session)
            result = ws.diff(
                from_ref,
                to_ref,
                paths=self.rel_paths(ws, paths),
                session=s.name,
                patch=not stat_only,
            )
            return {
                **result.to_json(max_patch_chars=MAX_PATCH_CHARS),
                "session": s.name,
                "from": from_ref or "latest",
                "to": to_ref or "now",
            }

    @_encodable
    def undo_file(
        self, path: str, session: str | None, force: bool = False, merge: Merge = False
    ) -> dict[str, Any]:
        with self.workspace() as ws:
            s = self.session(ws, session)
            rel = ws.rel(path, follow=False)
            # The agent asking is in its own open turn: it stays open, and what the undo
            # writes joins it (as undo_turn).
            result = s.undo_file(rel, force=force, end_open=False, merge=merge)
            action = result.actions.get(rel)
            what = {
                "M": "restored",
                "A": "deleted (the session created it)",
                "D": "recreated",
                None: "already as it was",
            }[action]
            if action is None and rel in result.left:
                what = f"left as it is ({result.left[rel]})"
            elif rel in result.markers:
                what = "written with conflict markers where both changed the same lines"
            elif rel in result.merged:
                what = "merged (the session's hunks taken back, the edits since kept)"
            return {
                **result.to_json(),
                "session": s.name,
                "path": rel,
                "action": action,
                "pre_rewind": result.pre,
                "message": f"{rel}: {what}, as before {result.ref} "
                f"(undo this with rewind ref={(result.pre or '')[:12]})",
            }

    @_encodable
    def turn_op(
        self, kind: str, turn: int | None, force: bool, session: str | None, merge: Merge = False
    ) -> dict[str, Any]:
        with self.workspace() as ws:
            s = self.session(ws, session)
            # The agent asking is in its own open turn (the reply that asks): what it means
            # is the last turn that ended, so the open one is left alone.
            result = (
                s.undo(turn=turn, force=force, end_open=False, merge=merge)
                if kind == "undo"
                else s.redo(force=force, join_open=True, merge=merge)
            )
            return {**result.to_json(), "session": s.name, "message": summary(result)}

    @_encodable
    def rewind(
        self, ref: str, paths: list[str] | None, dry_run: bool, session: str | None
    ) -> dict[str, Any]:
        with self.workspace() as ws:
            s = self.session(ws, session)
            result = ws.rewind(
                ref,
                paths=self.rel_paths(ws, paths),
                dry_run=dry_run,
                session=s.name,
                join_open=True,
            )
            return {**result.to_json(), "session": s.name}


def build_server(config: ServerConfig) -> MCPServer:
    """Return the MCP server with takeback's tools (not yet running)."""
    tools = _Tools(config)
    server: MCPServer = MCPServer(
        "takeback", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    # A client may ask before a destructive tool. Said outright, not left to the
    # protocol's defaults: no tool that writes is idempotent (a second undo takes back the
    # turn before; a second checkpoint is another step).
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writing = ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
    )

    @server.tool(
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        )
    )
    @_tool_errors
    def checkpoint(label: str = "", session: str | None = None) -> dict[str, Any]:
        """Take a snapshot of the workspace now, as a step you can rewind to.

        Returns its id and step number; `rewind` with ref set to either goes back to it.
        """
        return tools.checkpoint(label, session)

    @server.tool(annotations=reading)
    @_tool_errors
    def history(session: str | None = None, limit: int = 50) -> dict[str, Any]:
        """List the sessions, and the turns, steps and latest snapshots of one session."""
        return tools.history(session, limit)

    @server.tool(annotations=reading)
    @_tool_errors
    def changes(turn: int | None = None, session: str | None = None) -> dict[str, Any]:
        """List the files a turn changed (default: the last ended turn), with line counts."""
        return tools.changes(turn, session)

    @server.tool(annotations=reading)
    @_tool_errors
    def diff(
        from_ref: str | None = None,
        to_ref: str | None = None,
        paths: list[str] | None = None,
        stat_only: bool = False,
        session: str | None = None,
    ) -> dict[str, Any]:
        """Show a unified diff between two refs (default: the latest snapshot and the files now).

        Paths are relative to the workspace root.
        """
        return tools.diff(from_ref, to_ref, paths, stat_only, session)

    @server.tool(annotations=writing)
    @_tool_errors
    def undo_file(
        path: str, session: str | None = None, force: bool = False, merge: Merge = False
    ) -> dict[str, Any]:
        """Put one file back as it was before the session first changed it.

        A file the session created is deleted. A file changed since the session's last
        change to it (a person's edit) is a conflict unless ``force`` (which overwrites
        the edit) or ``merge`` (true: take back the session's hunks and keep the edit;
        where both changed the same lines nothing is written and the error names them;
        "markers": write conflict markers there instead). A snapshot is taken before
        writing; what it writes is part of your current reply (its turn).
        """
        return tools.undo_file(path, session, force, merge)

    @server.tool(annotations=writing)
    @_tool_errors
    def undo_turn(
        turn: int | None = None,
        force: bool = False,
        session: str | None = None,
        merge: Merge = False,
    ) -> dict[str, Any]:
        """Take back the last turn (or turn N): each file it changed goes back.

        Files changed since the turn are conflicts and nothing is written, unless force
        (overwrite them) or merge (true: take back the turn's hunks and keep the edits
        since; where both changed the same lines nothing is written and the error names
        the lines; "markers": write conflict markers there instead).
        """
        return tools.turn_op("undo", turn, force, session, merge)

    @server.tool(annotations=writing)
    @_tool_errors
    def redo(
        force: bool = False, session: str | None = None, merge: Merge = False
    ) -> dict[str, Any]:
        """Bring back what the last undo took back (merge: as for undo_turn)."""
        return tools.turn_op("redo", None, force, session, merge)

    @server.tool(annotations=writing)
    @_tool_errors
    def rewind(
        ref: str, paths: list[str] | None = None, dry_run: bool = True, session: str | None = None
    ) -> dict[str, Any]:
        """Put the workspace (or just paths) back as it was at ref.

        With dry_run (the default) it only returns the plan: M restored, A removed,
        D recreated. Set dry_run to false to write; a snapshot is taken first.
        """
        return tools.rewind(ref, paths, dry_run, session)

    return server


def serve(config: ServerConfig) -> None:
    """Serve MCP over stdio until the client closes stdin.

    Raises:
        ScanError: the root is not a folder.

    """
    from .. import Workspace

    Workspace(config.root, store=config.store)  # a bad root fails here, before serving
    build_server(config).run("stdio")
