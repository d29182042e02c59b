"""Integrations layer: the user's data folder (where default stores live), read quickly.

The library asks ``platformdirs`` for it, which answers for every platform; importing
it costs a new process about 10 ms on a busy machine, and every hook call and every
command that uses a default store is a new process. On Linux, in the two usual cases,
its answer is the XDG Base Directory rule, read here from the environment:

- ``$XDG_DATA_HOME/takeback`` when ``XDG_DATA_HOME`` is an absolute path;
- else, when it is unset or empty, ``$HOME/.local/share/takeback`` when ``HOME`` is an
  absolute path.

Every other case (another platform, Android, a relative or padded value, no ``HOME``)
returns None, and the library asks ``platformdirs`` as before. Where platformdirs
versions disagree (a relative ``XDG_DATA_HOME``) is among those cases.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

APP = "takeback"


def user_data_dir(env: Mapping[str, str], platform: str = sys.platform) -> str | None:
    """Return takeback's data folder as platformdirs would, or None to let it answer."""
    if platform != "linux" or "ANDROID_DATA" in env:
        return None
    xdg = env.get("XDG_DATA_HOME", "")
    if xdg:
        return os.path.join(xdg, APP) if _plain_absolute(xdg) else None
    home = env.get("HOME", "")
    if not _plain_absolute(home):
        return None
    # os.path.expanduser("~/.local/share"): HOME without its trailing slashes.
    return os.path.join(home.rstrip("/") + "/.local/share", APP)


def _plain_absolute(path: str) -> bool:
    return path.startswith("/") and path == path.strip()
