"""``pi-actors install | list | remove``: a local package directory and a wheel (no network:
pip gets only a file), through the real CLI; the package's skill and template reach the
model and go away with it."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from pathlib import Path

from support.wire import content_text

from pi_actors.cli.packages import classify, installed_packages
from pi_actors.testing.scripted_server import Reply


def _local_package(root: Path) -> Path:
    pkg = root / "pkg"
    (pkg / "skills" / "wave").mkdir(parents=True)
    (pkg / "skills" / "wave" / "SKILL.md").write_text("---\nname: wave\ndescription: Wave at people\n---\nWave.\n")
    (pkg / "prompts").mkdir()
    (pkg / "prompts" / "hail.md").write_text("---\ndescription: Hail someone\n---\nHail, $1!")
    return pkg


def _wheel(root: Path) -> Path:
    """A pure wheel of ``greetpkg`` whose ``pi_actors.resources`` entry point names its
    package, which holds ``prompts/`` and ``skills/``."""
    files = {
        "greetpkg/__init__.py": "",
        "greetpkg/prompts/cheer.md": "---\ndescription: Cheer\n---\nCheers, $@!",
        "greetpkg/skills/bow/SKILL.md": "---\nname: bow\ndescription: Bow politely\n---\nBow.\n",
        "greetpkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: greetpkg\nVersion: 1.0\n",
        "greetpkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "greetpkg-1.0.dist-info/entry_points.txt": "[pi_actors.resources]\ngreetpkg = greetpkg\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append("greetpkg-1.0.dist-info/RECORD,,")
    path = root / "greetpkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr("greetpkg-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


async def test_a_local_package_and_a_wheel_install_list_reach_the_model_and_remove(scripted, env, tmp_path):
    env.env.update(PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1")  # nothing but the given file
    pkg, wheel = _local_package(tmp_path), _wheel(tmp_path)

    done = await env.run("install", str(pkg))
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == f"Installed {pkg} (global)\n"
    done = await env.run("install", "-l", str(wheel))
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads((env.home / "settings.json").read_text())["packages"] == [str(pkg)]
    assert json.loads((env.work / ".pi-actors" / "settings.json").read_text())["packages"] == [str(wheel)]
    venvs = [p for p in (env.home / "packages").iterdir() if p.name.startswith("project-")]
    assert len(venvs) == 1 and (venvs[0] / "venv" / "bin" / "python").exists()  # pi-actors' own environment
    listed = (await env.run("list")).stdout.decode()
    assert f"  {pkg}  [local] {pkg}" in listed and f"  {wheel}  [pypi] greetpkg" in listed

    scripted.script += [Reply(text="ok"), Reply(text="ok")]
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "-p", "/hail Ann", "/cheer you all")
    assert done.returncode == 0, done.stderr.decode()
    system = scripted.requests[0]["body"]["messages"][0]["content"]
    assert "<name>wave</name>" in system and "<name>bow</name>" in system
    assert content_text(scripted.requests[0]["body"]["messages"][1]["content"]) == "Hail, Ann!"
    assert content_text(scripted.requests[1]["body"]["messages"][-1]["content"]) == "Cheers, you all!"

    assert (await env.run("remove", str(pkg))).returncode == 0
    done = await env.run("remove", "-l", str(wheel))
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads((env.home / "settings.json").read_text())["packages"] == []
    assert json.loads((env.work / ".pi-actors" / "settings.json").read_text())["packages"] == []
    assert not list((venvs[0] / "venv" / "lib").glob("*/site-packages/greetpkg"))  # uninstalled
    assert (await env.run("list")).stdout.decode() == "No packages installed.\n"
    again = await env.run("remove", str(pkg))
    assert again.returncode == 1 and again.stderr.decode() == f"Error: {pkg} is not installed (global); see: pi-actors list\n"


def test_sources_are_classified_as_pi_does(tmp_path):
    assert classify("./x") == ("local", "./x") and classify("/abs/p") == ("local", "/abs/p")
    assert classify("git:github.com/u/r@v1") == ("git", "git+https://github.com/u/r@v1")
    assert classify("git:git@github.com:u/r") == ("git", "git+ssh://git@github.com/u/r")
    assert classify("https://github.com/u/r") == ("git", "git+https://github.com/u/r")
    assert classify("pypi:pi-actors-x==1.0") == ("pypi", "pi-actors-x==1.0") and classify("requests") == ("pypi", "requests")


def test_a_local_package_manifest_in_pyproject_replaces_the_conventional_dirs(tmp_path):
    pkg = _local_package(tmp_path)
    (pkg / "more").mkdir()
    (pkg / "pyproject.toml").write_text('[tool.pi-actors]\nprompts = ["more"]\nextensions = ["ext.py"]\n')
    agent, work = tmp_path / "agent", tmp_path / "work"
    agent.mkdir()
    work.mkdir()
    (agent / "settings.json").write_text(json.dumps({"packages": [str(pkg), str(tmp_path / "gone")]}))
    (found,), warnings = installed_packages(str(agent), str(work))
    assert found.prompts == [str(pkg / "more")] and found.skills == [] and found.extensions == [str(pkg / "ext.py")]
    assert warnings == [f"Warning (packages): {tmp_path / 'gone'}: {tmp_path / 'gone'} does not exist"]
    assert not os.path.exists(agent / "packages")  # reading installs nothing
