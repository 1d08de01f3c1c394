"""Bounded reads of input files (scenarios, sweep specs): regular files only, at most a fixed
size, so that no input can exhaust memory or hang a command (``/dev/zero``, a FIFO, a 1 GB file).
The Rust side applies the same rule to the files a scenario names (``microsched_core::files``:
empirical CSVs at most 64 MiB)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: Largest scenario file (TOML or JSON) or sweep spec read: 16 MiB (the Rust loader's limit).
MAX_SCENARIO_BYTES = 16 << 20


def human_bytes(n: int) -> str:
    for name, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {name}" if n % size == 0 else f"{n / size:.1f} {name}"
    return f"{n} bytes"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_text(path: str | os.PathLike, field: str = "scenario", limit: int = MAX_SCENARIO_BYTES) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes.

    Raises ``FileNotFoundError`` (no such file), ``IsADirectoryError`` (a directory) or
    ``ValueError`` naming ``field`` and the limit (a device, FIFO or socket; a file over the
    limit; not UTF-8)."""
    p = Path(path)
    st = os.stat(p)  # FileNotFoundError as is; checked before opening (a FIFO would block)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{field}: `{p}` is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{field}: `{p}` is {_kind(st.st_mode)}, not a regular file: only regular files of at "
                         f"most {human_bytes(limit)} are read")

    def too_big(size: int) -> ValueError:
        return ValueError(f"{field}: `{p}` is {human_bytes(size)} ({size} bytes): larger than the limit of "
                          f"{human_bytes(limit)} ({limit} bytes) for this file")

    if st.st_size > limit:
        raise too_big(st.st_size)
    with open(p, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise too_big(len(data))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{field}: `{p}` is not UTF-8 text (byte {e.start})") from None
