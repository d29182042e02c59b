"""CLI layer: the commands that meet agents (hooks, MCP, watch) register here.

Each is a module of its own (``hooks_cmd``, ``hook_cmd``, ``mcp_cmd``, ``watch_cmd``),
loaded only when its command runs: the MCP SDK and watchfiles are imported by the
commands that use them, never by the hook entry point.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

#: command name -> module
COMMANDS = {
    "hooks": "hooks_cmd",
    "hook": "hook_cmd",
    "mcp": "mcp_cmd",
    "watch": "watch_cmd",
}


def register(sub: argparse._SubParsersAction[Any],
             common: argparse.ArgumentParser) -> None:
    """Add the integration commands to the parser."""
    for name, module in COMMANDS.items():
        mod = importlib.import_module(f".{module}", __package__)
        sp = sub.add_parser(name, parents=[common], help=mod.HELP, description=mod.HELP)
        mod.add_arguments(sp)
        sp.set_defaults(_module=module, _after_dashdash=getattr(mod, "AFTER_DASHDASH", None))
