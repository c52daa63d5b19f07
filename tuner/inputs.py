"""Opening the files users hand us (experiment files, request traces): regular files only, size capped.

A FIFO or a device would block or never end, and a file swapped between the check and the read must not slip
through: the file is opened non-blocking and checked on the open descriptor.
"""

from __future__ import annotations

import errno
import io
import os
import stat


def open_regular(path: os.PathLike[str] | str, max_bytes: int) -> io.BufferedReader:
    """``path`` opened for binary reading; :class:`OSError` if it is not a regular file or is larger than
    ``max_bytes`` (``EFBIG``)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a pipe, socket or device)")
        if info.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"larger than {_size(max_bytes)}")
        os.set_blocking(fd, True)
        stream = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return stream


def read_regular(path: os.PathLike[str] | str, limit: int) -> bytes:
    """Up to ``limit`` bytes of the regular file ``path`` (the caller refuses a file that reaches the limit)."""
    with open_regular(path, max_bytes=1 << 62) as stream:
        return stream.read(limit)


def _size(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n / 2**20:g} MiB"
