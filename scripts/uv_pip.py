"""``python scripts/uv_pip.py UV PYTHON ARGS...``: ``uv pip install ARGS`` into PYTHON's environment, configured as pip
is here.

`make setup` installs through uv when it can: uv downloads, unpacks and links in parallel where pip goes one
distribution after another (the project's install: 35 s against 97 s on the 2-core machine, fresh caches, the same
159 distributions at the same versions). uv does not read pip's configuration, so this reads it (``pip config list``:
the files and the ``PIP_*`` variables) and passes each setting on as uv's flag. A setting it does not know how to pass
on exits 3 before anything is installed, and the Makefile then installs with pip: a mirror, a constraint or a
certificate is never silently dropped. Only the standard library: it runs before anything is installed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from typing import Final

# pip setting -> uv flag (each value of a whitespace-separated list becomes one flag)
FLAGS: Final[dict[str, str]] = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
    "trusted-host": "--allow-insecure-host",
}
# pip setting -> environment variable uv reads
ENV: Final[dict[str, str]] = {
    "cert": "SSL_CERT_FILE",
    "timeout": "UV_HTTP_TIMEOUT",
    "default-timeout": "UV_HTTP_TIMEOUT",
    "proxy": "HTTPS_PROXY",
}
# pip settings that change nothing uv would do differently here
IGNORED: Final = frozenset(
    {
        "config-file",  # where pip read the settings listed: they are passed on one by one
        "disable-pip-version-check",
        "no-cache-dir",
        "progress-bar",
        "quiet",
        "verbose",
        "no-input",
        "root-user-action",
    }
)
UNSUPPORTED: Final = 3


class UnknownSetting(ValueError):
    """A pip setting this script cannot pass on to uv."""


def pip_settings(listing: str) -> list[tuple[str, str]]:
    """``pip config list`` lines (``global.find-links='/opt/wheels'``, ``:env:.cert='...'``) as (key, value)."""
    settings = []
    for line in listing.splitlines():
        if "=" not in line:
            continue
        name, raw = line.split("=", 1)
        key = name.rsplit(".", 1)[-1].strip()
        (value,) = shlex.split(raw) or [""]
        settings.append((key, value))
    return settings


def uv_arguments(settings: list[tuple[str, str]]) -> tuple[list[str], dict[str, str]]:
    """uv's flags and environment for pip's settings; raises UnknownSetting for one it cannot pass on."""
    flags: dict[str, list[str]] = {}
    env: dict[str, str] = {}
    for key, value in settings:
        if key in FLAGS:
            flags[key] = [arg for item in value.split() for arg in (FLAGS[key], item)]  # a later source wins, as pip
        elif key in ENV:
            env[ENV[key]] = value
        elif key == "no-index":
            flags[key] = ["--no-index"] if value.lower() in ("1", "true", "yes", "on") else []
        elif key not in IGNORED:
            raise UnknownSetting(f"pip setting {key}={value!r} has no uv equivalent here")
    # pip takes the best version over every index; uv's default takes the first index that has the package
    return [*(arg for args in flags.values() for arg in args), "--index-strategy", "unsafe-best-match"], env


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    uv, python, *args = argv
    listing = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True).stdout
    try:
        flags, env = uv_arguments(pip_settings(listing))
    except UnknownSetting as err:
        print(f"uv_pip.py: {err}; installing with pip instead", file=sys.stderr)
        return UNSUPPORTED
    command = [uv, "pip", "install", "--python", python, *flags, *args]
    return subprocess.run(command, env={**os.environ, **env}).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
