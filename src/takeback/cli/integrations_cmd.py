"""CLI layer: the commands that meet agents (hooks, MCP, watch), listed for the parser.

Each is a module of its own (``hooks_cmd``, ``hook_cmd``, ``mcp_cmd``, ``watch_cmd``),
loaded only when its command runs: the MCP SDK and the watcher are imported by the
commands that use them, never by the hook entry point.
"""

from __future__ import annotations

#: command name -> module
COMMANDS = {
    "hooks": "hooks_cmd",
    "hook": "hook_cmd",
    "mcp": "mcp_cmd",
    "watch": "watch_cmd",
}
