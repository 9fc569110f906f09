"""A load in a process of its own: `python -m <module>` reads one JSON spec (a line of stdin)
and prints its JSON result as the last line of stdout.

Every load of the bench runs apart from the servers under test, so their CPU is theirs
alone; `measure` is the one way the bench starts such a process and reads its answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench.servers import REPO

LOAD_TIMEOUT_S = 300


def measure(module: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run `spec` in `python -m module` to its end; the result it printed."""
    done = subprocess.run(  # noqa: S603 (our own interpreter and bench modules)
        [sys.executable, "-m", module],
        input=json.dumps(spec).encode() + b"\n",
        capture_output=True,
        cwd=REPO,
        timeout=LOAD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} {spec['kind']} failed:\n{done.stderr.decode()[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result
