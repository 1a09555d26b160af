"""Sandbox policies, the environment allow-list and the bubblewrap command line (no processes)."""

from __future__ import annotations

import os

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_actors.ai import types as T
from pi_actors.cli.main import runtime_config
from pi_actors.coding.sandbox import Limits, SandboxPolicy, SandboxUnavailable, default_mode, parse_size
from pi_actors.coding.sandbox.bwrap import build_argv, check_bwrap
from pi_actors.coding.sandbox.env import sandbox_environment, unsandboxed_environment


def test_the_default_policy_on_linux_is_workspace_write():
    assert default_mode() == "workspace-write"
    assert SandboxPolicy.from_config(None).mode == "workspace-write"
    with pytest.raises(ValueError, match="unknown sandbox mode"):
        SandboxPolicy(mode="danger-full-access")


def test_a_policy_survives_its_configuration_document():
    policy = SandboxPolicy(
        mode="read-only", workspace="/w", allow_network=True, hidden=("/a",), limits=Limits(10, 20, 30), home="/h"
    )
    assert SandboxPolicy.from_config(policy.to_config()) == policy


def test_the_sandbox_environment_is_an_allow_list_without_secrets():
    source = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "ANTHROPIC_API_KEY": "k1",
        "GITHUB_TOKEN": "k2",
        "AWS_SECRET_ACCESS_KEY": "k3",
        "PI_ACTORS_DIR": "/home/u/.pi-actors",
        "PI_ACTORS_API_KEY": "k4",
        "DATABASE_URL": "postgres://u:p@h/db",
        "SSH_AUTH_SOCK": "/run/user/1/ssh",
        "MY_TOOL_HOME": "/opt/tool",
        "PI_ACTORS_SANDBOX_ENV": "MY_TOOL_HOME, OTHER_SECRET",
        "OTHER_SECRET": "k5",
    }
    env = sandbox_environment(source)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "PI_ACTORS_DIR": "/home/u/.pi-actors",
        "PI_ACTORS_SANDBOX_ENV": "MY_TOOL_HOME, OTHER_SECRET",
        "MY_TOOL_HOME": "/opt/tool",  # asked for by name
        "TMPDIR": "/tmp",
    }


def test_without_a_sandbox_only_credential_names_are_removed():
    env = unsandboxed_environment({"PATH": "/bin", "OPENAI_API_KEY": "k", "GH_TOKEN": "t", "DATABASE_URL": "x"})
    assert env == {"PATH": "/bin", "DATABASE_URL": "x"}


def _pairs(argv: list[str], option: str) -> list[str]:
    return [argv[i + 1] if option in ("--tmpfs", "--chdir") else argv[i + 2] for i, a in enumerate(argv) if a == option]


def test_the_bwrap_command_line_binds_in_the_right_order(tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]")
    (home / ".netrc").write_text("machine x password y")
    ws = tmp_path / "ws"
    (ws / ".sessions").mkdir(parents=True)
    (ws / ".netrc").write_text("machine x password y")
    agent = tmp_path / "agent"
    agent.mkdir()
    policy = SandboxPolicy(
        workspace=str(ws), home=str(home), hidden=(str(agent), str(ws / ".sessions"), str(tmp_path), str(ws / ".netrc")),
        limits=Limits(tmp_size=1000, shm_size=2000),
    )
    argv = build_argv(policy, ["python", "-m", "x"], bwrap="/usr/bin/bwrap", status_fd=7)
    assert argv[:1] == ["/usr/bin/bwrap"] and argv[-4:] == ["--", "python", "-m", "x"]
    for option in ("--unshare-pid", "--as-pid-1", "--unshare-net", "--new-session"):
        assert option in argv
    # The zygote leaves when the pool's control socket closes: a parent-death signal could
    # kill bwrap mid-set-up, which strands its namespace child (see pi_actors.actors._sandboxed).
    assert "--die-with-parent" not in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL" and argv[argv.index("--json-status-fd") + 1] == "7"
    # All the zygote keeps, to give each worker namespaces of its own (workers drop them).
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--cap-add"] == ["CAP_SYS_ADMIN", "CAP_SETPCAP"]
    joined = " ".join(argv)
    assert (
        "--ro-bind / / --dev /dev --proc /proc --perms 1777 --size 2000 --tmpfs /dev/shm "
        "--perms 1777 --size 1000 --tmpfs /tmp --perms 0755 --size 1048576 --tmpfs /run "
        f"--perms 0755 --size 1048576 --tmpfs {home} --ro-bind {home}/.gitconfig {home}/.gitconfig "
        f"--ro-bind {home}/.config/git {home}/.config/git --perms 0755 --size 1048576 --tmpfs {agent}"
    ) in joined
    tmpfs = _pairs(argv, "--tmpfs")
    assert str(home / ".ssh") not in tmpfs  # hidden with the rest of $HOME
    assert str(tmp_path) not in tmpfs  # it contains the workspace: never hidden
    workspace_bind = argv.index("--bind")
    assert argv[workspace_bind : workspace_bind + 3] == ["--bind", str(ws), str(ws)]
    # Masks inside the workspace come after its bind, then every tmpfs mask is made read-only.
    later = f"--perms 0755 --size 1048576 --tmpfs {ws}/.sessions --ro-bind /dev/null {ws}/.netrc"
    assert joined.index(later) > joined.index(f"--bind {ws} {ws}")
    assert joined.endswith(
        f"--remount-ro /dev --remount-ro /run --remount-ro {home} --remount-ro {agent} --remount-ro {ws}/.sessions "
        "--chdir / -- python -m x"
    )


def test_a_workspace_in_home_stays_writable_and_a_home_in_the_workspace_is_still_hidden(tmp_path):
    home = tmp_path / "home"
    (home / "proj").mkdir(parents=True)
    (home / ".bashrc").write_text("export KEY=x")
    argv = " ".join(build_argv(SandboxPolicy(workspace=str(home / "proj"), home=str(home)), ["true"]))
    assert argv.index(f"--tmpfs {home} ") < argv.index(f"--bind {home}/proj {home}/proj")
    argv = " ".join(build_argv(SandboxPolicy(workspace=str(tmp_path), home=str(home)), ["true"]))
    assert argv.index(f"--bind {tmp_path} {tmp_path}") < argv.index(f"--tmpfs {home} ")
    # The workspace is $HOME itself: it is shown; credential stores are still masked.
    (home / ".ssh").mkdir()
    argv = " ".join(build_argv(SandboxPolicy(workspace=str(home), home=str(home)), ["true"]))
    assert f"--tmpfs {home} " not in argv and f"--tmpfs {home}/.ssh" in argv


def test_sandbox_settings_set_the_limits_and_the_home_allow_list():
    policy = SandboxPolicy.from_settings(
        {"memory": "2GiB", "tmpSize": "256M", "processes": 100, "homeAllow": ["~/.gitconfig", ".npmrc"]}, workspace="/w"
    )
    assert policy.limits.memory == 2 * 1024**3 and policy.limits.tmp_size == 256 * 1024**2
    assert policy.limits.processes == 100 and policy.home_allow == (".gitconfig", ".npmrc")
    assert SandboxPolicy.from_settings({"memory": "256M"}).limits.tmp_size == 64 * 1024**2  # a quarter of it
    for bad, message in (
        ({"memory": "lots"}, "sandbox.memory: expected a positive size"),
        ({"memory": "1M"}, "sandbox.memory: 1048576 is below the minimum"),
        ({"homeAllow": ["../etc"]}, "is not a path inside ~"),
        ({"homeAllow": "~/.gitconfig"}, "expected a list of paths"),
        ({"memroy": "1G"}, "unknown sandbox setting 'memroy'"),
        ("2G", "sandbox must be an object"),
    ):
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            SandboxPolicy.from_settings(bad)


@given(st.one_of(st.text(max_size=50), st.integers(), st.floats(), st.none(), st.booleans(), st.lists(st.integers())))
def test_a_size_setting_is_a_positive_size_or_a_one_line_error(value):
    try:
        size = parse_size(value, "sandbox.tmpSize")
    except ValueError as exc:
        assert str(exc).startswith("sandbox.tmpSize: expected a positive size") and "\n" not in str(exc)
    else:
        assert isinstance(size, int) and 0 < size < 2**62


def test_read_only_binds_the_workspace_read_only_and_allow_network_keeps_the_network(tmp_path):
    argv = build_argv(SandboxPolicy(mode="read-only", workspace=str(tmp_path), allow_network=True, home="/"), ["true"])
    assert "--unshare-net" not in argv
    i = argv.index(str(tmp_path))
    assert argv[i - 1 : i + 2] == ["--ro-bind", str(tmp_path), str(tmp_path)]


def test_without_bwrap_the_sandbox_is_unavailable_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable, match=r"'bwrap' is not installed .* Run with --sandbox off"):
        check_bwrap(SandboxPolicy(workspace=str(tmp_path)))


def test_the_cli_configuration_carries_the_policy_and_hides_the_agent_and_session_directories(tmp_path):
    model = T.Model(id="m", api="openai-completions", provider="p", base_url="http://127.0.0.1:1")
    common = dict(model=model, thinking="off", tools=["read"], cwd=str(tmp_path), system_prompt="", agent_dir="/agent")
    # (the tool pool's part as it crosses to its process: SandboxPolicy.to_config's shape)
    config = msgspec.to_builtins(runtime_config(**common, session_dir="/sessions", runtime_keys={}, key_sources={}))
    policy = SandboxPolicy.from_config(config["tools"]["sandbox"])
    assert policy.mode == "workspace-write" and policy.workspace == str(tmp_path) and not policy.allow_network
    assert set(policy.hidden) == {"/agent", "/sessions"}
    config = msgspec.to_builtins(
        runtime_config(**common, session_dir="/sessions", log_file="/var/log/pi.log", runtime_keys={}, key_sources={})
    )
    assert set(SandboxPolicy.from_config(config["tools"]["sandbox"]).hidden) == {"/agent", "/sessions", "/var/log/pi.log"}
    typed = runtime_config(**common, runtime_keys={}, key_sources={}, sandbox="off", allow_network=True)
    assert typed.tools.sandbox is not None
    assert typed.tools.sandbox.mode == "off" and typed.tools.sandbox.allow_network is True
    assert os.path.isabs(typed.tools.sandbox.workspace)


def test_a_bwrap_that_cannot_create_namespaces_makes_the_sandbox_unavailable_with_its_message(monkeypatch, tmp_path):
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not "
        "allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with pytest.raises(SandboxUnavailable) as info:
        check_bwrap(SandboxPolicy(workspace=str(tmp_path)))
    assert str(info.value) == (
        "bubblewrap failed to create a sandbox: bwrap: No permissions to create new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces. Run with --sandbox off to run tools without a sandbox."
    )


def test_the_bubblewrap_probe_runs_out_of_reach_of_ctrl_c_and_a_terminal_hang_up(tmp_path, monkeypatch):
    """The start-up probe is a ``bwrap`` too: in the terminal's process group, a Ctrl-C or a
    hang-up that killed it mid-set-up would strand its namespace child. A ``bwrap`` on PATH
    that records its session and process group, then runs the real one, shows where it ran."""
    import shutil
    import stat

    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("bubblewrap is not installed")
    seen = tmp_path / "seen"
    wrapper = tmp_path / "bin" / "bwrap"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nps -o sid= -o pgid= -p $$ > {seen}\nexec {real} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    assert check_bwrap(SandboxPolicy(mode="workspace-write", workspace=str(tmp_path))) == str(wrapper)
    sid, pgid = (int(word) for word in seen.read_text().split())
    assert sid == pgid and sid != os.getsid(0) and pgid != os.getpgid(0)
