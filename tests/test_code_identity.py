"""Which code produced a result (:mod:`jaxassoc.code_identity`): a plugin module's hash follows its file,
wherever it is imported from."""

import hashlib
import importlib
import sys
import zipfile
import zipimport
from pathlib import Path

from jaxassoc.code_identity import module_code

SOURCE = "def score():\n    return {sign}1\n"


def _zipped(path, sign):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("zipped_plugin.py", SOURCE.format(sign=sign))


def test_a_plugin_imported_from_a_zip_is_hashed_not_a_crash(tmp_path, monkeypatch):
    archive = tmp_path / "plugins.zip"
    _zipped(archive, "")
    monkeypatch.syspath_prepend(str(archive))
    monkeypatch.delitem(sys.modules, "zipped_plugin", raising=False)
    importlib.import_module("zipped_plugin")
    first = module_code("zipped_plugin")
    assert first["source_sha256"] == hashlib.sha256(SOURCE.format(sign="").encode()).hexdigest()[:16]
    _zipped(archive, "-")  # an edit of the zipped plugin, read as a new process's importer would
    monkeypatch.setattr(sys.modules["zipped_plugin"], "__loader__", zipimport.zipimporter(str(archive)))
    assert module_code("zipped_plugin")["source_sha256"] != first["source_sha256"]


def test_a_plugin_module_file_and_package_are_hashed_from_their_files(tmp_path, monkeypatch):
    (tmp_path / "single_plugin.py").write_text(SOURCE.format(sign=""))
    package = tmp_path / "package_plugin"
    package.mkdir()
    (package / "__init__.py").write_text("from package_plugin.helper import score\n")
    (package / "helper.py").write_text(SOURCE.format(sign=""))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("single_plugin", "package_plugin"):
        monkeypatch.delitem(sys.modules, name, raising=False)
        importlib.import_module(name)
    single, whole = module_code("single_plugin"), module_code("package_plugin")
    (package / "helper.py").write_text(SOURCE.format(sign="-"))  # an edit of a file the package imports
    assert module_code("package_plugin")["source_sha256"] != whole["source_sha256"]
    assert module_code("single_plugin") == single and single["version"] is None


def test_unchanged_plugin_files_are_not_read_again(tmp_path, monkeypatch):
    (tmp_path / "stamped_plugin.py").write_text(SOURCE.format(sign=""))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "stamped_plugin", raising=False)
    importlib.import_module("stamped_plugin")
    reads = []
    original = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self.name) or original(self))
    first = module_code("stamped_plugin")
    assert module_code("stamped_plugin") == first and reads == ["stamped_plugin.py"]  # the second: no read
    (tmp_path / "stamped_plugin.py").write_text(SOURCE.format(sign="-"))  # an edit: a new stamp, read again
    assert module_code("stamped_plugin")["source_sha256"] != first["source_sha256"]
    assert reads == ["stamped_plugin.py"] * 2
