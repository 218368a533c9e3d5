"""A PEP 517 build backend for the snapbank package, standard library only:
the package is pure Python (it loads libsnapbank_rt with ctypes), so a wheel
is its files, its metadata and a RECORD. Used by `pip install
bindings/python`; see pyproject.toml."""
import base64
import hashlib
import os
import tarfile
import zipfile

NAME, VERSION = "snapbank", "0.1.0"
HERE = os.path.dirname(os.path.abspath(__file__))
DIST = "%s-%s" % (NAME, VERSION)
METADATA = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: Python bindings for "
            "snapbank: a KV-cache snapshot store and a CPU LLM runtime\n"
            "Requires-Python: >=3.9\n" % (NAME, VERSION))
WHEEL = "Wheel-Version: 1.0\nGenerator: snapbank_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _package_files():
    pkg = os.path.join(HERE, NAME)
    for f in sorted(os.listdir(pkg)):
        if f.endswith(".py"):
            yield os.path.join(pkg, f), "%s/%s" % (NAME, f)


def _digest(data):
    d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "sha256=%s,%d" % (d, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "%s-py3-none-any.whl" % DIST
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, arc in _package_files():
            with open(path, "rb") as f:
                data = f.read()
            z.writestr(arc, data)
            records.append("%s,%s" % (arc, _digest(data)))
        for arc, text in (("%s.dist-info/METADATA" % DIST, METADATA),
                          ("%s.dist-info/WHEEL" % DIST, WHEEL)):
            z.writestr(arc, text)
            records.append("%s,%s" % (arc, _digest(text.encode())))
        records.append("%s.dist-info/RECORD,," % DIST)
        z.writestr("%s.dist-info/RECORD" % DIST, "\n".join(records) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    name = "%s.tar.gz" % DIST
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for f in ("pyproject.toml", "snapbank_build.py"):
            t.add(os.path.join(HERE, f), "%s/%s" % (DIST, f))
        for path, arc in _package_files():
            t.add(path, "%s/%s" % (DIST, arc))
        info = tarfile.TarInfo("%s/PKG-INFO" % DIST)
        data = METADATA.encode()
        info.size = len(data)
        import io
        t.addfile(info, io.BytesIO(data))
    return name
