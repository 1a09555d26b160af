"""The environment of a tool worker.

:func:`sandbox_environment` (sandboxed policies) keeps only allow-listed variables: the
basics a shell and common toolchains need (:data:`ALLOWED`), the ``LC_*`` and
``PI_ACTORS_*`` families, and any names listed in ``PI_ACTORS_SANDBOX_ENV`` (comma
separated) — then drops every name that looks like a credential (:func:`looks_secret`),
whatever list admitted it, and sets ``TMPDIR=/tmp`` (the sandbox's private /tmp).

:func:`unsandboxed_environment` (policy ``off``) keeps everything except the names the
supervisor also treats as credentials (``*_API_KEY``, ``*_TOKEN``, ``ANTHROPIC_*``, ...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["ALLOWED", "CREDENTIAL_NAME", "is_credential_name", "looks_secret", "sandbox_environment", "unsandboxed_environment"]

ALLOWED = frozenset(
    """
    PATH HOME USER LOGNAME SHELL LANG LANGUAGE TERM COLORTERM TZ EDITOR VISUAL PAGER
    NO_COLOR FORCE_COLOR CLICOLOR CLICOLOR_FORCE LS_COLORS
    XDG_CONFIG_HOME XDG_CACHE_HOME XDG_DATA_HOME XDG_STATE_HOME XDG_CONFIG_DIRS XDG_DATA_DIRS
    VIRTUAL_ENV CONDA_PREFIX CONDA_DEFAULT_ENV PYTHONPATH PYTHONHOME PYTHONUNBUFFERED
    PYTHONDONTWRITEBYTECODE PYTHONIOENCODING PYTHONUTF8 PYENV_ROOT PYENV_VERSION
    GOPATH GOROOT GOFLAGS GOCACHE GOMODCACHE CARGO_HOME RUSTUP_HOME RUSTFLAGS JAVA_HOME
    NVM_DIR NODE_PATH RBENV_ROOT GEM_HOME GEM_PATH MANPATH INFOPATH
    LD_LIBRARY_PATH PKG_CONFIG_PATH CC CXX CFLAGS CXXFLAGS CPPFLAGS LDFLAGS MAKEFLAGS
    SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE NODE_EXTRA_CA_CERTS
    """.split()
)
_ALLOWED_PREFIXES = ("LC_", "PI_ACTORS_")
_EXTRA_NAMES = "PI_ACTORS_SANDBOX_ENV"
_SECRET = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION)|^ANTHROPIC_|^OPENAI_|^AWS_|^AZURE_|^GOOGLE_",
    re.IGNORECASE,
)


#: The credential-name rule: environment variables no tool process and no coordinator gets
#: (the supervisor scrubs them from every child but the provider; policy "off" drops them too,
#: and the user's tools may rely on exactly this rule). Defined here, once.
CREDENTIAL_NAME = re.compile(r"(_API_KEY|_TOKEN|_SECRET|_SECRET_KEY|_ACCESS_KEY_ID|_PASSWORD)$|^ANTHROPIC_|^OPENAI_")


def is_credential_name(name: str) -> bool:
    """True for an environment variable that holds a credential by :data:`CREDENTIAL_NAME`."""
    return bool(CREDENTIAL_NAME.search(name))


def looks_secret(name: str) -> bool:
    """True for names that may hold a credential (``*_API_KEY``, ``*TOKEN*``, ``AWS_*``...)."""
    return bool(_SECRET.search(name))


def sandbox_environment(source: Mapping[str, str]) -> dict[str, str]:
    extra = {n.strip() for n in source.get(_EXTRA_NAMES, "").split(",") if n.strip()}
    env = {
        name: value
        for name, value in source.items()
        if (name in ALLOWED or name.startswith(_ALLOWED_PREFIXES) or name in extra) and not looks_secret(name)
    }
    env["TMPDIR"] = "/tmp"
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def unsandboxed_environment(source: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in source.items() if not is_credential_name(name)}
