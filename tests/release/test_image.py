"""What of the Docker image can be run without a Docker engine: its runtime stage, played
by hand on the release's wheel installed as the build stage installs it.

The service's environment of conftest.py is what the image's build stage makes (the same
wheel, the same constraints, no bytecode compiled up front); here it runs with the
image's `ENV`, in a working directory of its own as `WORKDIR`, its `CMD`, and the image's
`HEALTHCHECK` command must pass against it — with `/data` (the image's volume) a temporary
folder and the address loopback (the image's `0.0.0.0` would need keys).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import httpx

from tests.release.installed import run, running
from tests.support.processes import REPO, free_port

DOCKERFILE = (REPO / "Dockerfile").read_text()


def runtime_stage() -> str:
    """The Dockerfile from its last FROM on, continuation lines joined."""
    return DOCKERFILE.rsplit("\nFROM ", 1)[1].replace("\\\n", " ")


def instruction(name: str) -> str:
    """The arguments of the runtime stage's one `name` instruction."""
    [found] = re.findall(rf"^{name} (.*)$", runtime_stage(), re.MULTILINE)
    return found


def image_environment(data: Path, port: int) -> dict[str, str]:
    """The image's ENV, with its volume moved to `data` and the address to loopback."""
    pairs = dict(word.split("=", 1) for word in shlex.split(instruction("ENV")))
    pairs.pop("PATH")  # the venv's bin: the programs are called by their full path here
    pairs["EVENTLOG_DATABASE_URL"] = pairs["EVENTLOG_DATABASE_URL"].replace("/data/", f"{data}/")
    pairs.update(EVENTLOG_HOST="127.0.0.1", EVENTLOG_PORT=str(port))
    return pairs


def test_the_image_environment_and_command_serve_and_its_healthcheck_passes(
    service_python: Path, tmp_path: Path
) -> None:
    data, workdir = tmp_path / "data", tmp_path / "srv"
    data.mkdir()
    workdir.mkdir()
    port = free_port()
    env = image_environment(data, port)
    command = json.loads(instruction("CMD"))
    assert command == ["mcp-eventlog", "serve"]
    healthcheck = json.loads(instruction("HEALTHCHECK").split(" CMD ", 1)[1])
    assert healthcheck[0] == "python"
    script = [str(service_python.parent / command[0]), *command[1:]]
    with running(script, workdir, f"http://127.0.0.1:{port}/healthz", **env):
        # The image's healthcheck asks /readyz: ready means migrated, so serve migrated
        # the volume's SQLite file at start, as the image's comment says.
        checked = run([str(service_python), *healthcheck[1:]], workdir, **env)
        assert checked.returncode == 0, checked.stderr
        assert (data / "eventlog.db").is_file()
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").json()["status"] == "ok"
