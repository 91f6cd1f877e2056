"""A small ctypes layer over Linux's Landlock system calls (x86_64 and aarch64 share numbers).

Why not the `landlock` package from the index: its last release is a
development one (1.0.0.dev5) that handles file system rights only, with no
TCP rules (ABI 4) or scopes (ABI 6); these three system calls and four
structures are all we need, and they are tested here against the kernel.

Standard library only (see the package's docstring).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from collections.abc import Iterable

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

# File system rights, and the ABI that brought each one.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_BY_ABI = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a file (not dir) takes
READ = EXECUTE | READ_FILE | READ_DIR
CONNECT_TCP = 1 << 1  # LANDLOCK_ACCESS_NET_CONNECT_TCP (ABI 4)
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
NET_ABI, SCOPE_ABI = 4, 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed: 8 + 4 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPort(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def _syscall(number: int, *args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))  # standard library only: no error class of ours
    return result


def abi_version() -> int:
    """The Landlock ABI this kernel offers; 0 when it offers none (not Linux, disabled, too old)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (OSError, AttributeError):
        return 0


def fs_rights(abi: int) -> int:
    """Every file system right the given ABI handles."""
    rights = 0
    for since, bits in FS_BY_ABI.items():
        if abi >= since:
            rights |= bits
    return rights


def restrict(
    *,
    read: Iterable[str],
    write: Iterable[str],
    connect: Iterable[int] | None,
    abi: int,
    listed: Iterable[str] = (),
) -> None:
    """Hold this process (and whatever it executes) to the rules, for good.

    `read` paths may be read and executed, `write` paths read and changed in
    any way; everything else is denied. `connect`: the TCP ports it may
    connect to (None: TCP is not restricted). Paths that do not exist are left
    out. `listed` folders may be listed only. Signals and abstract Unix sockets
    stay within the sandbox (ABI 6).
    """
    handled = fs_rights(abi)
    net = CONNECT_TCP if connect is not None and abi >= NET_ABI else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= SCOPE_ABI else 0
    attr = _RulesetAttr(handled, net, scoped)
    size = 8 if abi < NET_ABI else 16 if abi < SCOPE_ABI else 24
    ruleset = _syscall(
        CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    try:
        for path in read:
            _allow_path(ruleset, path, READ & handled)
        for path in write:
            _allow_path(ruleset, path, handled)
        for path in listed:
            _allow_path(ruleset, path, READ_DIR)
        for port in connect if connect is not None and net else ():
            rule = _NetPort(CONNECT_TCP, port)
            _syscall(ADD_RULE, ruleset, RULE_NET_PORT, ctypes.byref(rule), ctypes.c_uint32(0))
        if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        _syscall(RESTRICT_SELF, ruleset, ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _allow_path(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.ELOOP):
            return  # nothing there to allow
        raise
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        if not rights:  # a file given as a folder to list: nothing to allow
            return
        rule = _PathBeneath(rights, fd)
        _syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(fd)
