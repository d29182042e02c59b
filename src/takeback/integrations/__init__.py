"""Integrations layer: what meets an agent, built on the public API only.

- ``_claude_code``: Claude Code's hook payloads mapped to sessions, turns, touches and
  command steps, and the merge of takeback's hooks into Claude Code's settings files.
- ``_mcp_server``: the Model Context Protocol server (``takeback mcp``).
- ``_watch``: runs an agent that has no hooks and takes a step each time file activity
  settles (``takeback watch``).

Nothing here is imported by ``import takeback``: each module is loaded by the one
command that needs it, so the hook entry point starts without the MCP SDK or watchfiles.
"""
