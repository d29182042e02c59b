"""CLI layer: the commands that meet agents (hooks, MCP, watch) register here."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser],
             common: argparse.ArgumentParser) -> None:
    """Add the integration commands to the parser (none yet)."""
