"""The few bpf(2) commands the tool needs, through ctypes: find a program by
id, list its maps, read and write array maps. tc loads the programs (one
instance, with its own maps, per attachment point), so nothing is pinned and
everything goes away with the interface it is attached to.

Layouts are those of union bpf_attr and struct bpf_{prog,map}_info in
include/uapi/linux/bpf.h; the kernel accepts a shorter info_len than its own
struct, so only the leading fields used here are declared."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

_NR_BPF = {"x86_64": 321, "aarch64": 280, "riscv64": 280}.get(platform.machine())

BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_UPDATE_ELEM = 2
BPF_PROG_TEST_RUN = 10
BPF_PROG_GET_FD_BY_ID = 13
BPF_MAP_GET_FD_BY_ID = 14
BPF_OBJ_GET_INFO_BY_FD = 15

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class BpfError(OSError):
    pass


def _bpf(cmd: int, attr: bytearray) -> int:
    if _NR_BPF is None:
        raise BpfError(errno.ENOSYS, f"bpf(2) number unknown for {platform.machine()}")
    buf = (ctypes.c_char * len(attr)).from_buffer(attr)
    ret = _libc.syscall(_NR_BPF, cmd, buf, len(attr))
    if ret < 0:
        e = ctypes.get_errno()
        raise BpfError(e, f"bpf cmd {cmd}: {os.strerror(e)}")
    return ret


def _attr(fmt: str, *vals) -> bytearray:
    a = bytearray(128)
    struct.pack_into(fmt, a, 0, *vals)
    return a


def prog_fd_by_id(prog_id: int) -> int:
    return _bpf(BPF_PROG_GET_FD_BY_ID, _attr("<I", prog_id))


def map_fd_by_id(map_id: int) -> int:
    return _bpf(BPF_MAP_GET_FD_BY_ID, _attr("<I", map_id))


def _info(fd: int, size: int) -> bytearray:
    info = bytearray(size)
    cbuf = (ctypes.c_char * size).from_buffer(info)
    _bpf(BPF_OBJ_GET_INFO_BY_FD,
         _attr("<IIQ", fd, size, ctypes.addressof(cbuf)))
    return info


def prog_info(fd: int) -> dict:
    """{"id", "name", "map_ids"} of a program fd."""
    # struct bpf_prog_info: nr_map_ids at 52, map_ids (u64 pointer) at 56, name at 64.
    ids = (ctypes.c_uint32 * 16)()
    info = bytearray(80)
    struct.pack_into("<IQ", info, 52, 16, ctypes.addressof(ids))
    cbuf = (ctypes.c_char * len(info)).from_buffer(info)
    _bpf(BPF_OBJ_GET_INFO_BY_FD, _attr("<IIQ", fd, len(info), ctypes.addressof(cbuf)))
    nr = struct.unpack_from("<I", info, 52)[0]
    return {
        "id": struct.unpack_from("<I", info, 4)[0],
        "name": info[64:80].split(b"\0", 1)[0].decode(),
        "map_ids": [ids[i] for i in range(min(nr, 16))],
    }


def map_info(fd: int) -> dict:
    # struct bpf_map_info: type, id, key_size, value_size, max_entries, map_flags, name[16]
    info = _info(fd, 40)
    typ, mid, ksz, vsz, maxe, _flags = struct.unpack_from("<6I", info, 0)
    return {"type": typ, "id": mid, "key_size": ksz, "value_size": vsz, "max_entries": maxe,
            "name": info[24:40].split(b"\0", 1)[0].decode()}


def possible_cpus() -> int:
    """Number of possible CPUs: the stride of a per-CPU map value."""
    with open("/sys/devices/system/cpu/possible") as f:
        text = f.read().strip()
    n = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        n = max(n, int(hi or lo) + 1)
    return n


def map_lookup(fd: int, key: bytes, value_size: int) -> bytes:
    kbuf = ctypes.create_string_buffer(key, len(key))
    vbuf = ctypes.create_string_buffer(value_size)
    _bpf(BPF_MAP_LOOKUP_ELEM,
         _attr("<IIQQQ", fd, 0, ctypes.addressof(kbuf), ctypes.addressof(vbuf), 0))
    return vbuf.raw


def map_update(fd: int, key: bytes, value: bytes) -> None:
    kbuf = ctypes.create_string_buffer(key, len(key))
    vbuf = ctypes.create_string_buffer(value, len(value))
    _bpf(BPF_MAP_UPDATE_ELEM,
         _attr("<IIQQQ", fd, 0, ctypes.addressof(kbuf), ctypes.addressof(vbuf), 0))


def prog_test_run(fd: int, packet: bytes, repeat: int = 1) -> tuple[int, bytes]:
    """Runs the program on `packet` (BPF_PROG_TEST_RUN): (return value, the
    packet as the program left it)."""
    din = ctypes.create_string_buffer(packet, len(packet))
    dout = ctypes.create_string_buffer(len(packet) + 256)
    attr = _attr("<IIIIQQII", fd, 0, len(packet), len(dout), ctypes.addressof(din),
                 ctypes.addressof(dout), repeat, 0)
    _bpf(BPF_PROG_TEST_RUN, attr)
    retval, _size_in, size_out = struct.unpack_from("<III", attr, 4)
    return retval, dout.raw[:size_out]


def prog_exists(prog_id: int) -> bool:
    try:
        fd = prog_fd_by_id(prog_id)
    except BpfError as e:
        if e.errno == errno.ENOENT:
            return False
        raise
    os.close(fd)
    return True
