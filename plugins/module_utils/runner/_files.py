# -*- coding: utf-8 -*-
# Copyright: gpupool.vcf contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files a module writes on the controller or the managed node: one atomic writer, one report writer.

:func:`atomic_write` writes a whole file at once: a temporary file in the same folder, flushed to
disk, given its mode, then moved over the old one, so a reader sees the old file or the new one,
never a part. Secrets and tokens get mode 0600 (set on the temporary file before a byte is written,
and moved with ``os.replace``, so the file is never readable by others, whatever mode the old one
had); reports and generated files get 0644, moved with the module's ``atomic_move`` (which also
keeps an existing file's owner and SELinux context). The mode given is the file's mode after the
move, whatever the mover does (``atomic_move`` gives a new file the umask's mode).

:func:`write_report` is the report writer: it compares the new text with the file's, writes only
when it differs and never in check mode, and returns what changed and what was there before (for
``--diff``). A report it replaces keeps that file's mode (one made 0600 stays 0600). ``OSError`` propagates: the runner names it ("Unable to write report ...").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat
import tempfile

from ansible_collections.gpupool.vcf.plugins.module_utils.pure._plan import Failure

SECRET_MODE = 0o600
REPORT_MODE = 0o644


def atomic_write(path, data, mode, move=None):
    """Write ``data`` (bytes, or text written as UTF-8 with its line ends as they are) to ``path`` at once.

    ``mode`` is the new file's mode; ``move(tmp, path)`` moves the temporary file over ``path``
    (``os.replace`` unless given: pass the module's ``atomic_move`` for files that keep an existing
    file's attributes). The temporary file is removed when anything fails.
    """
    path = os.path.abspath(path)
    if not isinstance(data, bytes):
        data = data.encode("utf-8")
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".%s." % os.path.basename(path))
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        (move or os.replace)(tmp, path)
        if stat.S_IMODE(os.stat(path).st_mode) != mode:
            os.chmod(path, mode)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_text(path):
    """The text of ``path`` with its line ends as written (a CSV's CRLF included), or None when it does not exist."""
    if not os.path.exists(path):
        return None
    with open(path, newline="", encoding="utf-8") as fh:
        return fh.read()


def replaced_text(path, force, what, **result):
    """The text of the file a module is about to write (``what``: "design file <path>"), None when there is
    none yet; a Failure (with ``result``) when it exists and ``force`` was not given, before anything is written."""
    if not os.path.exists(path):
        return None
    if not force:
        raise Failure("Unable to write %s: it exists; give force: true to replace it, or another dest. "
                      "Nothing was written." % what, **result)
    return read_text(path)


def write_report(module, path, text, mode=REPORT_MODE):
    """(changed, before) of writing the report ``text`` to ``path``: written atomically (``mode``, the module's
    ``atomic_move``) when it differs from the file's text, unless the module runs in check mode, which
    predicts only; a file replaced keeps its own mode. ``before`` is the file's text, None when there was none."""
    path = os.path.abspath(path)
    before = read_text(path)
    if before == text:
        return False, before
    if not module.check_mode:
        if before is not None:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        atomic_write(path, text, mode, move=getattr(module, "atomic_move", None))
    return True, before


__all__ = ["REPORT_MODE", "SECRET_MODE", "atomic_write", "read_text", "write_report"]
