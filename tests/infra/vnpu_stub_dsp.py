#!/usr/bin/env python3
"""A stand-in DSP process for the unit tests of hexbuild's libcdsprpc.so (hexbuild/dsp/host/): it
speaks the virtual NPU's wire protocol (vnpu-spec) on fd 3 as the real DSP runtime does, launched
the same way (``STUB -cpu v73 RUNTIME 3``), with a few skel methods that exercise the host side.
The real DSP runtime under qemu-hexagon is tested in tests/test_vnpu_host.py too; this stub makes
the failures that a real skel cannot be asked for (a crash at a chosen call, a process that does
not exit, a malformed message) and runs in milliseconds.

Skel methods (REMOTE_SCALARS_METHOD of an INVOKE on any handle):
  2 echo: out[0] = in[0] reversed       3 crash: SIGSEGV      4 sleep: in[0] = ms, then echo
  5 fail: status 0x8000040e             6 poke: in[0] = {int32 fd, uint32 offset, bytes}: writes
    the bytes into the DSP's own mapping of fd (the host must see them)
  7 garbage: a reply that is not a whole header      8 exit: exits 0 in the middle of the call
  9 long: a success reply one byte longer than the out buffers
A host QUEUE_PACKET is answered on the same queue: the same buffers, the message reversed, and every
byte of each buffer's range incremented in the DSP's mapping. The runtime argument is ignored except
for a file named ``*.ignore-eof``: then the process does not exit on EOF.
"""

from __future__ import annotations

import mmap
import os
import signal
import socket
import struct
import sys
import time

REPLY = 0x80000000
DSP_OFFSET = 0x80000400


def main(argv: list[str]) -> int:
    runtime = argv[3] if len(argv) > 3 else ""
    fd = int(argv[4]) if len(argv) > 4 else 3
    sock = socket.socket(fileno=fd)
    maps: dict[int, mmap.mmap] = {}
    queues: set[int] = set()
    next_handle = 0x1000

    def send(typ: int, seq: int, body: bytes) -> None:
        sock.sendmsg([struct.pack("<III", typ, seq, len(body)) + body])

    while True:
        msg, anc, _flags, _addr = sock.recvmsg(16 << 20, socket.CMSG_SPACE(16))
        if not msg:
            if runtime.endswith(".ignore-eof"):
                time.sleep(3600)
            return 0
        typ, seq, ln = struct.unpack_from("<III", msg)
        body = msg[12:]
        assert ln == len(body), (typ, ln, len(body))
        if typ == 1:  # OPEN
            uri = body.rstrip(b"\0").decode()
            if "missing" in uri:
                send(typ | REPLY, seq, struct.pack("<i", DSP_OFFSET + 0x3E - (1 << 32)))
            else:
                next_handle += 1
                send(typ | REPLY, seq, struct.pack("<iQ", 0, next_handle))
        elif typ == 2:  # INVOKE
            handle, sc, nb = struct.unpack_from("<QII", body)
            sizes = struct.unpack_from(f"<{nb}I", body, 16)
            nin = (sc >> 16) & 0xFF
            ins, off = [], 16 + 4 * nb
            for s in sizes[:nin]:
                ins.append(body[off:off + s])
                off += s
            outs = sizes[nin:]
            method = (sc >> 24) & 0x1F
            if method == 3:
                os.kill(os.getpid(), signal.SIGSEGV)
            if method == 8:
                return 0
            if method == 7:
                sock.send(b"\1\2")
                continue
            if method == 5:
                send(typ | REPLY, seq, struct.pack("<i", DSP_OFFSET + 0xE - (1 << 32)))
                continue
            if method == 4:
                time.sleep(struct.unpack_from("<I", ins[0])[0] / 1000)
            if method == 6:
                pfd, poff = struct.unpack_from("<iI", ins[0])
                data = ins[0][8:]
                maps[pfd][poff:poff + len(data)] = data
            out = b""
            if outs:
                out = ins[0][::-1][:outs[0]].ljust(outs[0], b"\0") + b"".join(b"\0" * s for s in outs[1:])
            send(typ | REPLY, seq, struct.pack("<i", 0) + out + (b"!" if method == 9 else b""))
        elif typ == 3:  # CLOSE
            send(typ | REPLY, seq, struct.pack("<i", 0))
        elif typ == 4:  # MMAP
            host_fd, _flags, offset, size = struct.unpack_from("<iIQQ", body)
            fds = [int.from_bytes(d[i:i + 4], "little") for lvl, t, d in anc
                   if lvl == socket.SOL_SOCKET and t == socket.SCM_RIGHTS for i in range(0, len(d), 4)]
            maps[host_fd] = mmap.mmap(fds[0], size, mmap.MAP_SHARED, offset=offset)
            os.close(fds[0])
            send(typ | REPLY, seq, struct.pack("<iI", 0, 0x40000000 + 0x1000 * len(maps)))
        elif typ == 5:  # MUNMAP
            (host_fd,) = struct.unpack_from("<i", body)
            m = maps.pop(host_fd, None)
            if m is not None:
                m.close()
            send(typ | REPLY, seq, struct.pack("<i", 0 if m is not None else DSP_OFFSET + 0x48 - (1 << 32)))
        elif typ == 6:  # QUEUE_OPEN
            queues.add(struct.unpack_from("<Q", body)[0])
            send(typ | REPLY, seq, struct.pack("<i", 0))
        elif typ == 7:  # QUEUE_CLOSE
            queues.discard(struct.unpack_from("<Q", body)[0])
            send(typ | REPLY, seq, struct.pack("<i", 0))
        elif typ == 8:  # QUEUE_PACKET
            qid, flags, nb, ml = struct.unpack_from("<QIII", body)
            bufs = [struct.unpack_from("<iIII", body, 20 + 16 * i) for i in range(nb)]
            m = body[20 + 16 * nb:20 + 16 * nb + ml]
            for bfd, _bf, boff, bsize in bufs:
                view = maps[bfd]
                end = boff + (bsize or len(view))
                view[boff:end] = bytes((b + 1) & 0xFF for b in view[boff:end])
            send(9, 0, body[:20 + 16 * nb] + m[::-1])
        else:
            send(typ | REPLY, seq, struct.pack("<i", DSP_OFFSET + 0x14 - (1 << 32)))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
