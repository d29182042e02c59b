"""Integrations layer: open the page in a browser without putting its token on a command line.

A browser is started as a new process, and its command line can be read by every user
of the machine (``ps``, ``/proc/PID/cmdline``). So the browser is given a file instead:
a small page, readable by its owner only, in a folder of its own made for this server,
that sends the browser on to the address with its token. The folder goes when the
server stops. (Jupyter opens its notebook server the same way, for the same reason.)
"""

from __future__ import annotations

import html
import os
import shutil
import tempfile
import webbrowser
from pathlib import Path


class PageOpener:
    """The redirect file for one server's page, removed by :meth:`close`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._folder: str | None = None

    def open(self) -> bool:
        """Open the page in the user's browser (False: no browser could be started)."""
        self._folder = tempfile.mkdtemp(prefix="takeback-ui-")  # mode 0700, made anew
        path = os.path.join(self._folder, "open.html")
        quoted = html.escape(self.url, quote=True)
        text = (
            "<!doctype html>\n<html><head><meta charset='utf-8'>"
            f'<meta http-equiv="refresh" content="0;url={quoted}">'
            "<title>takeback</title></head>\n"
            f'<body><p><a href="{quoted}">Open the takeback page</a></p></body></html>\n'
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return webbrowser.open(Path(path).as_uri())

    def close(self) -> None:
        """Remove the redirect file and its folder."""
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
