"""A SysV shared-memory segment (shmget/shmat through ctypes) for an AFL coverage map."""

from __future__ import annotations

import ctypes
import ctypes.util
import re

_IPC_PRIVATE = 0
_IPC_CREAT = 0o1000
_IPC_EXCL = 0o2000
_IPC_RMID = 0
_NONZERO = re.compile(rb"[^\x00]")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.shmget.argtypes = (ctypes.c_int, ctypes.c_size_t, ctypes.c_int)
_libc.shmget.restype = ctypes.c_int
_libc.shmat.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int)
_libc.shmat.restype = ctypes.c_void_p
_libc.shmdt.argtypes = (ctypes.c_void_p,)
_libc.shmctl.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


class SharedMap:
    """The map a forkserver child writes its edge hit counts into (``__AFL_SHM_ID``)."""

    def __init__(self, size: int):
        self.size = size
        self.shm_id = _libc.shmget(_IPC_PRIVATE, size, _IPC_CREAT | _IPC_EXCL | 0o600)
        if self.shm_id < 0:
            raise OSError(ctypes.get_errno(), "shmget failed")
        addr = _libc.shmat(self.shm_id, None, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            _libc.shmctl(self.shm_id, _IPC_RMID, None)
            raise OSError(ctypes.get_errno(), "shmat failed")
        self._addr = addr
        # Marked for removal at once: it lives while attached (we and the target) and can
        # never leak past our exit.
        _libc.shmctl(self.shm_id, _IPC_RMID, None)

    def clear(self) -> None:
        ctypes.memset(self._addr, 0, self.size)

    def read(self) -> bytes:
        return ctypes.string_at(self._addr, self.size)

    def hits(self) -> dict[int, int]:
        """Non-zero map bytes: ``{index: count}``."""
        data = self.read()
        return {m.start(): data[m.start()] for m in _NONZERO.finditer(data)}

    def close(self) -> None:
        if self._addr is not None:
            _libc.shmdt(self._addr)
            self._addr = None
