"""Integrations layer: Claude Code's hooks, and the hook machinery every agent shares.

- ``_payload``: a hook call's payload in Claude Code's terms (every other agent's is
  read into the same), its tool names and events, and the workspace root it names;
- ``_hook``: the one mapping of those events onto sessions, turns, touches and steps
  (``handle``), and a call's entry that never raises (``run``);
- ``_settings``: takeback's hooks merged into (and out of) Claude Code's settings files.

Agent-neutral, shared by every agent's hook call:

- ``_call``: what a ``takeback hook`` process was given;
- ``_deadline``: its time bound;
- ``_pending``: command steps begun by one process and finished by another;
- ``_baseline``: the workspace's first snapshot, begun in a detached process;
- ``_log``: ``hook.log``, where a call that failed open says why.

Nothing is imported here: a hook call loads only what it uses.
"""
