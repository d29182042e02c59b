"""Integrations layer: what meets an agent, built on the public API only.

- ``_claude_hook``: Claude Code's hook payloads mapped to sessions, turns, touches and
  command steps (``takeback hook claude-code``), failing open within a time bound.
- ``_claude_settings``: the merge of takeback's hooks into Claude Code's settings files
  (``takeback hooks install|uninstall claude-code``).
- ``_mcp_server``: the Model Context Protocol server (``takeback mcp``).
- ``_watch``: runs an agent that has no hooks and takes a step each time file activity
  settles (``takeback watch``).
- ``_service``: the workspace's watching service, a detached process that tells
  snapshots which folders changed (``takeback service``).

Nothing here is imported by ``import takeback``: each module is loaded by the one
command that needs it, so the hook entry point starts without the MCP SDK.
"""
