"""Sessions created at once in one directory, by many processes and threads (a web app that
makes a session per request): every create succeeds, although each one sweeps the
directory's stale temp files while the others are writing theirs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from contextree import Message, Session

CREATOR = textwrap.dedent("""
    import sys
    from contextree import Message, Session
    directory, tag, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    failures = 0
    for i in range(n):
        try:
            s = Session.create(f"{directory}/{tag}-{i}.jsonl")
            s.append_message(Message.user("hi"))
            s.close()
        except Exception as e:
            failures += 1
            print(f"{type(e).__name__}: {e}", file=sys.stderr)
    print(failures)
""")


def test_concurrent_creates_in_one_directory_all_succeed(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", CREATOR, str(tmp_path), f"p{k}", "150"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k in range(4)]
    errors: list[str] = []

    def threads_create(t: int) -> None:
        for i in range(50):
            try:
                Session.create(tmp_path / f"t{t}-{i}.jsonl").close()
            except Exception as e:  # pragma: no cover - reported below
                errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=threads_create, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert out.strip() == "0", err
    assert not errors, errors[:3]
    sessions = sorted(tmp_path.glob("*.jsonl"))
    assert len(sessions) == 4 * 150 + 4 * 50
    assert not list(tmp_path.glob(".*.tmp"))
    for path in sessions[:: 37]:
        with Session.open(path, readonly=True) as s:
            assert len(s) in (0, 1)
    with Session.open(sessions[0]) as s:
        s.append_message(Message.user("still writable"))
