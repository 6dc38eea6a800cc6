"""``-o PATH --force`` onto something that is not a regular file (a FIFO, a character device
such as /dev/null, a directory): refused with a one-line error, the node left as it was,
and no command ever blocks opening it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextree import Message, Session
from contextree._files import atomic_write
from contextree.cli import app
from contextree.errors import InvalidArgument

runner = CliRunner()


def _session(tmp_path: Path) -> Path:
    path = tmp_path / "s.jsonl"
    with Session.create(path) as s:
        s.append_message(Message.user("hello"))
        s.append_message(Message.assistant("hi"))
    return path


def _specials(tmp_path: Path) -> list[Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    out = [fifo, folder]
    if os.geteuid() == 0:  # a device node needs root: /dev/null's numbers
        null = tmp_path / "null"
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        out.append(null)
    return out


@pytest.mark.timeout(60)
def test_export_and_import_never_replace_a_device_or_a_fifo(tmp_path: Path) -> None:
    src = _session(tmp_path)
    exported = tmp_path / "b.jsonl"
    assert runner.invoke(app, ["export", "brute", str(src), "-o", str(exported)]).exit_code == 0
    for node in _specials(tmp_path):
        before = os.lstat(node)
        for args in (["export", "brute", str(src), "-o", str(node), "--force"],
                     ["import", "brute", str(exported), "-o", str(node), "--force"]):
            result = runner.invoke(app, args)
            assert result.exit_code == 2, (args, result.stdout, result.stderr)
            assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
            assert ("not a regular file" in result.stderr
                    or "is a directory" in result.stderr), result.stderr
            after = os.lstat(node)
            assert (after.st_mode, after.st_ino, after.st_rdev) == (
                before.st_mode, before.st_ino, before.st_rdev)


def test_atomic_write_refuses_to_replace_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InvalidArgument, match="FIFO"):
        atomic_write(fifo, b"data")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert atomic_write(tmp_path / "plain", b"data").read_bytes() == b"data"
