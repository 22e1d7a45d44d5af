"""A PEP 517 build backend for the microbox client, standard library only.

It builds a pure-Python wheel of the `microbox` package (and an editable
one, PEP 660) from the [project] table of pyproject.toml. It reads only the
simple `key = "value"` entries this project uses, so it needs no TOML
library on Python < 3.11.
"""

import base64
import hashlib
import os
import re
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "microbox"


def _project():
    """The [project] table's string entries."""
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        text = f.read()
    table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S).group(1)
    return dict(re.findall(r'^([A-Za-z-]+)\s*=\s*"([^"]*)"\s*$', table, re.M))


def _names():
    meta = _project()
    return meta, "%s-%s" % (meta["name"], meta["version"])


def _metadata(meta):
    return (
        "Metadata-Version: 2.1\n"
        "Name: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
        % (meta["name"], meta["version"], meta["description"], meta["requires-python"])
    )


WHEEL = "Wheel-Version: 1.0\nGenerator: microbox_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _write_wheel(directory, files):
    """Writes a wheel holding files ({archive name: bytes}) plus its
    dist-info, and returns its file name."""
    meta, base = _names()
    info = base + ".dist-info"
    files = dict(files)
    files[info + "/METADATA"] = _metadata(meta).encode()
    files[info + "/WHEEL"] = WHEEL.encode()
    record = [_record_line(n, d) for n, d in sorted(files.items())] + [info + "/RECORD,,"]
    files[info + "/RECORD"] = ("\n".join(record) + "\n").encode()
    name = base + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in sorted(files.items()):
            z.writestr(n, d)
    return name


# The package's modules, and its data: the HumanEval judge table, which
# the client reads next to its code.
SUFFIXES = (".py", ".json")


def _package_files():
    files = {}
    src = os.path.join(ROOT, PACKAGE)
    for entry in sorted(os.listdir(src)):
        if entry.endswith(SUFFIXES):
            with open(os.path.join(src, entry), "rb") as f:
                files[PACKAGE + "/" + entry] = f.read()
    return files


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A .pth file puts this directory on sys.path: edits take effect at once.
    return _write_wheel(wheel_directory, {"microbox_editable.pth": (ROOT + "\n").encode()})
