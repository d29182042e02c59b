"""CLI layer: running, inside the watching service, a call the relay handed to it.

The service (``integrations/_service.py``) takes a call from ``cli/_relay.py`` and runs it
here as the command line would have: in the caller's folder, with the caller's
environment, and with what it prints captured and sent back. A hook call runs without
its ``Deadline``: the caller's process keeps that bound (it gives up waiting; the
service's run is never cut short half way).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping, Sequence


def run_call(
    argv: Sequence[str], cwd: str, env: Mapping[str, str], stdin: bytes | None
) -> tuple[int, str, str]:
    """Run one command line as the caller's process would; return (exit code, out, err).

    The service is single-threaded and runs one call at a time, so the process's folder,
    environment and standard streams are the call's while it runs, and are put back
    after.
    """
    from . import main
    from .hook_cmd import is_hook_call, parse

    out, err = io.StringIO(), io.StringIO()
    here = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    saved_env = dict(os.environ)
    saved_streams = sys.stdout, sys.stderr
    try:
        try:
            os.chdir(cwd)
        except OSError as e:
            return 1, "", f"takeback: error: {e.strerror or e}: {cwd}\n"
        _set_environ(env)
        sys.stdout, sys.stderr = out, err
        if is_hook_call(argv):
            from ..integrations._agent_hook import run as run_hook

            run_hook(stdin or b"", parse(argv), env, deadline=None)
            code = 0
        else:
            code = main(list(argv), relay=False)
    finally:
        sys.stdout, sys.stderr = saved_streams
        _set_environ(saved_env)
        os.fchdir(here)
        os.close(here)
    return code, out.getvalue(), err.getvalue()


def _set_environ(env: Mapping[str, str]) -> None:
    """Make ``os.environ`` hold exactly ``env``, changing only what differs.

    Each change is a ``putenv`` or ``unsetenv``: clearing all and setting all again cost
    about 0.6 ms of every call, where two calls from one shell differ in a few names.
    """
    environ = os.environ
    for name in [n for n in environ if n not in env]:
        del environ[name]
    for name, value in env.items():
        # A name the environment cannot hold (empty, or with "=" or NUL: a caller's
        # process may have one) is left out, as it would not reach a child either.
        if environ.get(name) != value and _settable(name, value):
            environ[name] = value


def _settable(name: str, value: str) -> bool:
    return bool(name) and "=" not in name and "\0" not in name and "\0" not in value
