"""A check of SQLite's write-ahead log before a store opens it.

SQLite stops reading its log at the first frame whose checksum fails and silently drops
that frame and every later one, although those were committed and synced; a log that was
cut or deleted loses its frames the same way. Nothing in the database then says records
are missing: the run's version rolls back with them. Two things do tell, and are checked
here, read-only, before SQLite's own recovery can discard the evidence:

- a frame that fails its checksum followed by a commit frame of the same log generation (the
  same salts): frames are written in order, so the bad one was once whole (a flipped bit);
  frames after the last commit that mark none are an aborted transaction (a full disk), not
  damage;
- the log index (``-shm``, left behind by a process that died) counting more frames than
  the log holds: the log was cut or deleted;
- a log header that fails its checksum in a log holding whole frames: the header is synced
  before the frames of its generation are written, so it was whole once (SQLite would
  ignore every frame).

A torn last frame (a power cut mid-commit) is neither: that commit was never acknowledged.

The check runs only when no connection uses the log (SQLite's recovery, which drops the
frames, only runs then too): a live log read while another process appends to it or
restarts it is not evidence. A caller must not run it in a process that has the database
open itself: closing the index file it read drops that process's POSIX locks on it.
"""

from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path

WRITE_LOCK = 120  # the index file's byte a writer holds while its transaction is open
DMS_LOCK = 128  # the index file's byte every open connection holds a read lock on (SQLite's "DMS" lock)

WAL_MAGIC = (0x377F0682, 0x377F0683)
WAL_HEADER = 32
FRAME_HEADER = 24


def _checksum(data: bytes, big_endian: bool, s0: int, s1: int) -> tuple[int, int]:
    words = struct.unpack((">" if big_endian else "<") + f"{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def wal_frames(wal: bytes) -> tuple[int, int | None]:
    """(valid frames, the first bad frame followed by frames of its generation, or None)."""
    if len(wal) < WAL_HEADER:
        return 0, None
    magic, _, page, _, salt1, salt2, c1, c2 = struct.unpack(">8I", wal[:WAL_HEADER])
    if magic not in WAL_MAGIC or page < 512 or page & (page - 1):
        return 0, None
    big = bool(magic & 1)
    if _checksum(wal[:24], big, 0, 0) != (c1, c2):
        return 0, None
    size = FRAME_HEADER + page
    count = (len(wal) - WAL_HEADER) // size
    s0, s1 = c1, c2
    for n in range(count):
        at = WAL_HEADER + n * size
        header = wal[at:at + FRAME_HEADER]
        f_salt1, f_salt2, f_c1, f_c2 = struct.unpack(">4I", header[8:24])
        ok = (f_salt1, f_salt2) == (salt1, salt2)
        if ok:
            s0, s1 = _checksum(header[:8], big, s0, s1)
            s0, s1 = _checksum(wal[at + FRAME_HEADER:at + size], big, s0, s1)
            ok = (s0, s1) == (f_c1, f_c2)
        if not ok:
            later = any(committed_frame(wal[WAL_HEADER + m * size:WAL_HEADER + m * size + FRAME_HEADER], salt1, salt2)
                        for m in range(n + 1, count))
            return n, (n + 1 if later and (f_salt1, f_salt2) == (salt1, salt2) else None)
    return count, None


def committed_frame(header: bytes, salt1: int, salt2: int) -> bool:
    """Whether a frame header of this log generation marks a commit (its database size is set).
    Frames after the last commit without one belong to a transaction that never committed (a
    full disk mid-write leaves them, a torn one among them): not damage, nothing is lost."""
    f_commit, f_salt1, f_salt2 = struct.unpack(">3I", header[4:16])
    return f_commit != 0 and (f_salt1, f_salt2) == (salt1, salt2)


def committed_end(wal: bytes) -> int:
    """Where the log's next transaction writes its first frame: just past its last committed frame
    (past its header when none is). Frames of a transaction that never committed (a full disk
    mid-write) may lie beyond it: the next transaction writes over them."""
    frames, _ = wal_frames(wal)
    if frames == 0:
        return WAL_HEADER
    page, salt1, salt2 = struct.unpack(">I4x2I", wal[8:24])
    size = FRAME_HEADER + int(page)
    commits = [n for n in range(frames) if committed_frame(wal[WAL_HEADER + n * size:][:FRAME_HEADER], salt1, salt2)]
    return WAL_HEADER + (commits[-1] + 1 if commits else 0) * size


def header_damaged(wal: bytes) -> bool:
    """A log header (magic and page size intact) failing its checksum, followed by whole frames."""
    if len(wal) < WAL_HEADER:
        return False
    magic, _, page, _, _, _, c1, c2 = struct.unpack(">8I", wal[:WAL_HEADER])
    if magic not in WAL_MAGIC or page < 512 or page & (page - 1):
        return False
    whole = (len(wal) - WAL_HEADER) // (FRAME_HEADER + page)
    return whole > 0 and _checksum(wal[:24], bool(magic & 1), 0, 0) != (c1, c2)


def index_frames(shm: bytes) -> int:
    """How many frames the log index says the log holds (0 when it says nothing usable)."""
    if len(shm) < 48:
        return 0
    first, second = shm[:48], shm[48:96]
    if first != second:  # the two copies of the header differ: an index being written, not evidence
        return 0
    version, = struct.unpack("=I", first[:4])
    is_init = first[12]
    max_frame, = struct.unpack("=I", first[16:20])
    return max_frame if version == 3007000 and is_init else 0


def held(shm_path: str | Path, byte: int) -> bool:
    """Whether another process holds a lock on ``byte`` of the log's index file. Never call it in
    a process that has the database open (closing the file drops that process's locks)."""
    try:
        fd = os.open(shm_path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, byte)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)  # the probe's lock goes with it


def log_in_use(shm_path: str | Path) -> bool:
    """Whether a connection (of another process) has the log open: it holds the DMS lock."""
    return held(shm_path, DMS_LOCK)


def wal_damage(db: Path) -> str | None:
    """What is wrong with the database's write-ahead log, or None (also while it is in use)."""
    wal_path, shm_path = Path(f"{db}-wal"), Path(f"{db}-shm")
    if log_in_use(shm_path):
        return None
    try:
        wal = wal_path.read_bytes() if wal_path.exists() else b""
        shm = shm_path.read_bytes()[:96] if shm_path.exists() else b""
    except OSError:
        return None
    frames, bad = wal_frames(wal)
    if bad is not None:
        return (f"{wal_path}: frame {bad} fails its checksum and committed frames follow it: SQLite would drop "
                f"them silently (the log is damaged)")
    if header_damaged(wal):
        return (f"{wal_path}: its header fails its checksum although the log holds committed frames: SQLite "
                "would ignore them all silently (the log is damaged)")
    indexed = index_frames(shm)
    if indexed > frames:
        what = "is missing" if not wal else f"holds {frames} valid frames"
        return (f"{wal_path}: the log index counts {indexed} committed frames but the log {what}: it was cut, "
                "damaged or deleted (records would be lost silently)")
    return None
