"""Two threads importing a package and its submodule at once (citegate.runtime.imports).

The package's `__init__` runs in one thread while another imports its submodule directly, and the
submodule needs the package: the interleaving of the ingestion consumer's first pass after a
restart (`KeyError: 'aws_lambda_powertools.utilities.data_classes'`). Events fix the order, so
the race happens every time without the fix; each case runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PACKAGE = {
    "__init__.py": "from racepkg import common\nfrom racepkg.sub import S\n",
    # The package's thread holds the package while the other thread gets inside the submodule.
    "common.py": (
        "import time\nimport racesync\n"
        "racesync.in_package.set()\n"
        "racesync.in_sub.wait(1)\n"
        "time.sleep(0.2)  # the other thread is now waiting for the package\n"
    ),
    "sub.py": "import racesync\nracesync.in_sub.set()\nimport racepkg\nS = 1\n",
}

DRIVER = """
import json, sys, threading, types
sys.path.insert(0, sys.argv[1])
racesync = types.ModuleType("racesync")
racesync.in_package, racesync.in_sub = threading.Event(), threading.Event()
sys.modules["racesync"] = racesync
if sys.argv[2] == "serialized":
    from citegate.runtime.imports import serialize_imports
    serialize_imports()
outcomes = {}

def package():
    try:
        import racepkg
        outcomes["package"] = "ok"
    except BaseException as error:
        outcomes["package"] = f"{type(error).__name__}: {error}"

def submodule():
    racesync.in_package.wait(5)
    try:
        import racepkg.sub
        outcomes["submodule"] = "ok"
    except BaseException as error:
        outcomes["submodule"] = f"{type(error).__name__}: {error}"

threads = [threading.Thread(target=package), threading.Thread(target=submodule)]
for t in threads: t.start()
for t in threads: t.join(10)
print(json.dumps(outcomes))
"""


def _run(tmp_path: Path, mode: str) -> dict[str, str]:
    package = tmp_path / "racepkg"
    package.mkdir(exist_ok=True)
    for name, text in PACKAGE.items():
        (package / name).write_text(text)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(tmp_path), mode],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_concurrent_imports_of_a_package_and_its_submodule_break_without_serialization(
    tmp_path: Path,
) -> None:
    """The race itself, in plain CPython: what the local runtime must not let happen."""
    outcomes = _run(tmp_path, "plain")
    assert outcomes["submodule"] == "KeyError: 'racepkg'", outcomes
    assert outcomes["package"] != "ok", outcomes


def test_serialized_imports_load_both_in_turn(tmp_path: Path) -> None:
    assert _run(tmp_path, "serialized") == {"package": "ok", "submodule": "ok"}


def test_serialize_imports_is_idempotent_and_keeps_importing() -> None:
    code = (
        "from citegate.runtime.imports import imports_serialized, serialize_imports\n"
        "import importlib._bootstrap as b\n"
        "assert not imports_serialized()\n"
        "serialize_imports(); first = b._find_and_load; serialize_imports()\n"
        "assert imports_serialized() and b._find_and_load is first\n"
        "import importlib, email.mime.text, json.decoder\n"
        "importlib.import_module('xml.dom.minidom')\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "ok", done.stderr


# The two imports that met after a restart: a request thread loading an HTTP function (Powertools'
# event handler imports the data_classes package) and the queue consumer's first event (the batch
# utility imports data_classes.sqs_event directly). Started together, they collide nearly every time.
POWERTOOLS = """
import json, sys, threading
sys.setswitchinterval(1e-6)
if sys.argv[1] == "serialized":
    from citegate.runtime.imports import serialize_imports
    serialize_imports()
import aws_lambda_powertools
start = threading.Barrier(2)
outcomes = {}

def load(label, name):
    start.wait()
    try:
        __import__(name)
        outcomes[label] = "ok"
    except BaseException as error:
        outcomes[label] = f"{type(error).__name__}: {error}"

threads = [
    threading.Thread(target=load, args=("request", "aws_lambda_powertools.event_handler")),
    threading.Thread(target=load, args=("consumer", "aws_lambda_powertools.utilities.batch")),
]
for t in threads: t.start()
for t in threads: t.join(30)
print(json.dumps(outcomes))
"""


def _powertools(mode: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", POWERTOOLS, mode], capture_output=True, text=True, timeout=60, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_restart_crash_with_the_real_packages() -> None:
    """Without serialization, the consumer's KeyError of the acceptance test; with it, none."""
    plain = [_powertools("plain") for _ in range(5)]
    crash = "KeyError: 'aws_lambda_powertools.utilities.data_classes'"
    assert any(outcome["consumer"] == crash for outcome in plain), plain
    for _ in range(5):
        assert _powertools("serialized") == {"request": "ok", "consumer": "ok"}
