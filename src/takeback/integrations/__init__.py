"""Integrations layer: what meets an agent, built on the public API only.

- ``claude_code``: Claude Code's hook payloads mapped to sessions, turns, touches and
  command steps (``takeback hook claude-code``), failing open within a time bound, and
  the merge of takeback's hooks into its settings files (``takeback hooks install``);
  its time bound, pending steps, first snapshot and log serve every agent's hook.
- ``_agent_hook``, ``_agent_settings``: every other agent's hook calls, read into that
  one mapping (one reader per agent: ``_codex``, ``_gemini``, ``_cursor``, ``_copilot``),
  and their hook files.
- ``_mcp_server``: the Model Context Protocol server (``takeback mcp``).
- ``_watch``: runs an agent that has no hooks and takes a step each time file activity
  settles (``takeback watch``).
- ``_service``: the workspace's watching service, a detached process that tells
  snapshots which folders changed (``takeback service``).

Nothing here is imported by ``import takeback``: each module is loaded by the one
command that needs it, so the hook entry point starts without the MCP SDK.
"""
