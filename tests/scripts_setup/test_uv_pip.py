"""scripts/uv_pip.py: pip's configuration passed on to uv flag by flag, and a setting it cannot pass on stops it
before anything is installed (the Makefile then installs with pip)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "uv_pip.py"


@pytest.fixture(scope="module")
def uv_pip() -> ModuleType:
    spec = importlib.util.spec_from_file_location("uv_pip", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# What `pip config list` prints on the project's CPU machines: files first, then the PIP_* variables (":env:").
LISTING = """global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/other-wheels'
"""


def test_each_setting_becomes_uvs_flag_or_variable(uv_pip: ModuleType) -> None:
    flags, env = uv_pip.uv_arguments(uv_pip.pip_settings(LISTING))
    assert flags == [
        "--constraint",
        "/etc/xdg/pip/constraints.txt",
        "--extra-index-url",
        "file:///opt/pypi/simple",
        "--extra-index-url",
        "file:///opt/pypi-more/simple",
        "--find-links",
        "/opt/other-wheels",  # the variable wins over the file, as in pip
        "--index-strategy",
        "unsafe-best-match",  # pip's choice over several indexes: the best version in any of them
    ]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "UV_HTTP_TIMEOUT": "180"}


def test_no_index_and_trusted_hosts(uv_pip: ModuleType) -> None:
    flags, _ = uv_pip.uv_arguments([("no-index", "true"), ("trusted-host", "a.example b.example")])
    assert flags[:5] == ["--no-index", "--allow-insecure-host", "a.example", "--allow-insecure-host", "b.example"]
    flags, _ = uv_pip.uv_arguments([("no-index", "false")])
    assert "--no-index" not in flags


def test_a_setting_without_a_uv_equivalent_is_refused(uv_pip: ModuleType) -> None:
    with pytest.raises(uv_pip.UnknownSetting, match="pip setting require-hashes='1' has no uv equivalent"):
        uv_pip.uv_arguments([("find-links", "/w"), ("require-hashes", "1")])


def _pip_env(tmp_path: Path, **pip: str) -> dict[str, str]:
    """This process's environment without any pip configuration but ``pip`` (PIP_* variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, **{f"PIP_{k.upper()}": v for k, v in pip.items()}}


def test_main_runs_uv_with_the_flags_and_refuses_before_running_it(
    uv_pip: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls"
    uv = tmp_path / "uv"
    uv.write_text(f'#!/usr/bin/env bash\necho "$@ SSL_CERT_FILE=${{SSL_CERT_FILE:-}}" >> {calls}\n')
    uv.chmod(0o755)
    for key, value in _pip_env(tmp_path, FIND_LINKS="/w", CERT="/c.pem").items():
        monkeypatch.setenv(key, value)
    for key in [k for k in os.environ if k.startswith("PIP_") and k not in ("PIP_FIND_LINKS", "PIP_CERT")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    assert uv_pip.main([str(uv), sys.executable, "-q", "torch==2.13.0"]) == 0
    assert calls.read_text().split() == [
        "pip",
        "install",
        "--python",
        sys.executable,
        "--find-links",
        "/w",
        "--index-strategy",
        "unsafe-best-match",
        "-q",
        "torch==2.13.0",
        "SSL_CERT_FILE=/c.pem",
    ]
    monkeypatch.setenv("PIP_REQUIRE_HASHES", "1")
    assert uv_pip.main([str(uv), sys.executable, "torch"]) == uv_pip.UNSUPPORTED
    assert len(calls.read_text().splitlines()) == 1, "uv must not run when a setting cannot be passed on"
