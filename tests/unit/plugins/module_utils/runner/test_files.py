"""runner/_files: the one atomic writer (mode set before a byte is written, the old file or the new one,
never a part, no temporary file left) and the one report writer (compares, check mode predicts, --diff)."""
import os
import stat

import pytest

from ansible_collections.gpupool.vcf.plugins.module_utils.runner import _files


class Module:
    """What the report writer uses of a module: check_mode and atomic_move (which keeps attributes)."""

    def __init__(self, check_mode=False):
        self.check_mode = check_mode
        self.moves = []

    def atomic_move(self, src, dest):
        self.moves.append((os.path.basename(dest), stat.S_IMODE(os.stat(src).st_mode)))
        os.replace(src, dest)


def mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def test_a_secret_is_0600_even_over_a_wider_file(tmp_path):
    path = tmp_path / "client.tok"
    path.write_text("old")
    os.chmod(str(path), 0o644)
    _files.atomic_write(str(path), b"TOKEN\n", _files.SECRET_MODE)
    assert path.read_bytes() == b"TOKEN\n" and mode(path) == 0o600
    assert sorted(os.listdir(str(tmp_path))) == ["client.tok"]


def test_text_is_written_as_utf8_with_its_line_ends(tmp_path):
    path = tmp_path / "usage.csv"
    _files.atomic_write(str(path), "a,b\r\nGPU-\u00e9,1\r\n", _files.REPORT_MODE)
    assert path.read_bytes() == "a,b\r\nGPU-\u00e9,1\r\n".encode("utf-8") and mode(path) == 0o644
    assert _files.read_text(str(path)) == "a,b\r\nGPU-\u00e9,1\r\n"
    assert _files.read_text(str(tmp_path / "none")) is None


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old\n")

    def broken_move(src, dest):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        _files.atomic_write(str(path), "new\n", _files.REPORT_MODE, move=broken_move)
    assert path.read_text() == "old\n" and os.listdir(str(tmp_path)) == ["report.md"]
    with pytest.raises(OSError):
        _files.atomic_write(str(tmp_path / "missing" / "x"), "new\n", _files.REPORT_MODE)


def test_the_report_writer_compares_predicts_and_writes(tmp_path):
    path = str(tmp_path / "audit.md")
    check = Module(check_mode=True)
    assert _files.write_report(check, path, "# audit\n") == (True, None)
    assert not os.path.exists(path) and check.moves == []
    module = Module()
    assert _files.write_report(module, path, "# audit\n") == (True, None)
    assert module.moves == [("audit.md", 0o644)] and mode(path) == 0o644
    assert _files.write_report(module, path, "# audit\n") == (False, "# audit\n")
    assert _files.write_report(module, path, "# audit 2\n") == (True, "# audit\n")
    assert len(module.moves) == 2 and open(path).read() == "# audit 2\n"


def test_the_report_writer_lets_os_errors_through(tmp_path):
    with pytest.raises(OSError):
        _files.write_report(Module(), str(tmp_path / "no-such-folder" / "r.md"), "x")


def real_module(check_mode=False):
    """An AnsibleModule as a module run makes it: its own atomic_move (which gives a new file the umask's mode)."""
    from ansible.module_utils.basic import AnsibleModule
    from tests.lib.module_main import module_args

    with module_args({}, check_mode=check_mode):
        return AnsibleModule(argument_spec={}, supports_check_mode=True)


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_a_new_report_gets_the_report_mode_whatever_the_umask(tmp_path, umask):
    module = real_module()
    old = os.umask(umask)
    try:
        assert _files.write_report(module, str(tmp_path / "usage.json"), "{}\n") == (True, None)
    finally:
        os.umask(old)
    assert mode(tmp_path / "usage.json") == 0o644


@pytest.mark.parametrize("kept", [0o600, 0o640, 0o644])
@pytest.mark.parametrize("mover", ["ansible", "os.replace"])
def test_a_replaced_report_keeps_its_mode(tmp_path, kept, mover):
    path = tmp_path / "chargeback.csv"
    path.write_text("old\n")
    os.chmod(str(path), kept)
    module = real_module() if mover == "ansible" else Module()
    if mover == "os.replace":
        module.atomic_move = None  # a writer without the module's mover: os.replace
    assert _files.write_report(module, str(path), "new\n") == (True, "old\n")
    assert path.read_text() == "new\n" and mode(path) == kept
    assert sorted(os.listdir(str(tmp_path))) == ["chargeback.csv"]


def test_the_mode_given_is_the_mode_after_a_mover_that_sets_its_own(tmp_path):
    def loose_move(src, dest):
        os.replace(src, dest)
        os.chmod(dest, 0o666)

    _files.atomic_write(str(tmp_path / "r.md"), "x\n", _files.REPORT_MODE, move=loose_move)
    assert mode(tmp_path / "r.md") == 0o644
