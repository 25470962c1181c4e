"""The MTU doctor's UDP probe: the largest UDP datagram with DF set that the far end
actually receives, so a path that treats ICMP apart (echoes pass, other traffic of the
same size does not, or the reverse) is caught beside the DF ping.

Two small Python programs run on the hosts (python3, standard library only):

- the receiver (`receiver_argv`), started on the far end, bound to its address and
  PORT, answers every datagram with `got LEN TOKEN` (a few bytes, so the answer itself
  never meets the MTU);
- the sender (`sender_argv`, its program on stdin: `python3 - ADDR PORT SIZE WAIT`)
  sends one datagram whose IP packet is SIZE bytes with IP_MTU_DISCOVER =
  IP_PMTUDISC_DO (DF set, the learnt path MTU obeyed) and IP_RECVERR (ICMP errors read
  from the error queue), waits WAIT s and prints one line:

      passed 1450                                   the receiver said it got all of it
      frag-needed 1451 mtu=1450 from=198.18.64.1    an ICMP "fragmentation needed" came back
      local 1501 mtu=1450                           the sender's device or learnt path MTU refused it
      lost 1451                                     nothing came back within WAIT s
      error 1400 icmp=3/3 from=198.18.64.12         another ICMP error (here: port unreachable)

`parse_udp_probe` turns that line into the same Probe the DF ping gives
(harness/tools/mtu.py), so one bisection finds both. Tested on the captures of
tests/data/capture_mtu.sh.
"""

from __future__ import annotations

import re

from harness.tools.mtu import ERROR, FRAG_NEEDED, LOCAL, LOST, PASSED, Probe

PORT = 19801                   # the receiver's UDP port
IP_UDP_HEADERS = 28            # IPv4 20 + UDP 8: a datagram of N payload bytes is an N + 28-byte packet

SENDER = r"""
import errno, os, select, socket, struct, sys, time
addr, port, size, wait = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
IP_MTU_DISCOVER, IP_PMTUDISC_DO, IP_RECVERR, IP_MTU, MSG_ERRQUEUE = 10, 2, 11, 14, 0x2000
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO)
s.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
s.connect((addr, port))
token = os.urandom(8).hex()
payload = token.encode().ljust(size - 28, b"x")
try:
    s.send(payload)
except OSError as e:
    if e.errno != errno.EMSGSIZE:
        print("error", size, e.strerror); sys.exit(0)
    print("local", size, "mtu=%d" % s.getsockopt(socket.IPPROTO_IP, IP_MTU)); sys.exit(0)
want = ("got %d %s" % (len(payload), token)).encode()
p = select.poll()
p.register(s, select.POLLIN | select.POLLERR)
end = time.monotonic() + wait
while time.monotonic() < end:
    for _fd, ev in p.poll(max(0.0, end - time.monotonic()) * 1000):
        if ev & select.POLLERR:
            _data, anc, _fl, _a = s.recvmsg(1, 512, MSG_ERRQUEUE)
            for lvl, typ, d in anc:
                if lvl == socket.IPPROTO_IP and typ == IP_RECVERR and len(d) >= 24:
                    ee_errno, origin, itype, icode, _p, info, _dt = struct.unpack("=IBBBBII", d[:16])
                    frm = socket.inet_ntoa(d[20:24])
                    if origin == 2 and itype == 3 and icode == 4:
                        print("frag-needed", size, "mtu=%d" % info, "from=%s" % frm); sys.exit(0)
                    if origin == 1 and ee_errno == errno.EMSGSIZE:
                        print("local", size, "mtu=%d" % info); sys.exit(0)
                    print("error", size, "icmp=%d/%d" % (itype, icode), "from=%s" % frm); sys.exit(0)
        if ev & select.POLLIN:
            try:
                if s.recv(256) == want:
                    print("passed", size); sys.exit(0)
            except OSError:
                pass
print("lost", size)
"""

RECEIVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("listening", flush=True)
while True:
    data, peer = s.recvfrom(65535)
    s.sendto(("got %d %s" % (len(data), data[:16].decode(errors="replace"))).encode(), peer)
"""


def sender_argv(addr: str, size: int, wait: int = 1, port: int = PORT) -> list[str]:
    """One datagram whose IP packet is `size` bytes with DF set (the program: SENDER on stdin)."""
    if size < IP_UDP_HEADERS + 16:
        raise ValueError(f"a UDP probe of {size} bytes cannot hold the headers and its token")
    return ["python3", "-", addr, str(port), str(size), str(wait)]


def receiver_argv(addr: str, port: int = PORT) -> list[str]:
    """The far end: answers each datagram on addr:port with its length and token."""
    return ["python3", "-c", RECEIVER, addr, str(port)]


_LINE = re.compile(r"^(passed|frag-needed|local|lost|error) (\d+)(.*)$", re.M)
_KV = re.compile(r"(\w+)=(\S+)")


def parse_udp_probe(size: int, stdout: str, stderr: str, returncode: int | None) -> Probe:
    """Pure: one `sender_argv` probe's output → its Probe (ping's outcomes: passed,
    frag-needed, local, lost; anything else an error)."""
    if returncode is None:
        return Probe(size, ERROR, error="UDP probe timed out (killed)")
    m = _LINE.search(stdout)
    if returncode != 0 or m is None or int(m[2]) != size:
        why = (stderr.strip() or stdout.strip() or f"exit {returncode}").splitlines()[-1]
        return Probe(size, ERROR, error=f"UDP probe exited {returncode}: {why}")
    kv = dict(_KV.findall(m[3]))
    mtu = int(kv["mtu"]) if kv.get("mtu", "").isdigit() else None
    outcome = {"passed": PASSED, "frag-needed": FRAG_NEEDED, "local": LOCAL, "lost": LOST}.get(m[1])
    if outcome is None:
        return Probe(size, ERROR, error=f"UDP probe: {m[0].strip()}")
    return Probe(size, outcome, mtu, kv.get("from"))
