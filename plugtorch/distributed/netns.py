"""A cluster on one Linux machine: each "host" a network namespace, linked over TCP.

Multi-host behaviour (MPI's launcher reaching other hosts, data crossing a real
TCP path at a chosen link speed) can be tested without the hosts. Each host is a
network namespace with its own address, joined to the others by a veth link
through a bridge that lives in a namespace of its own, so the machine's own
network is never touched. A ``tc`` htb class on each host's link caps it
(``rate="1gbit"``). ``mpiexec`` runs inside the first host and reaches the others
exactly as on a cluster, through its ssh launcher, given a script in place of ssh
that runs the command in the host's namespace under the host's own hostname
(``unshare --uts``), so MPI sees separate machines. Over those links MPICH's UCX
netmod still finds shared memory (it recognises one machine), so :meth:`mpiexec`
forces its TCP transport (``UCX_TLS=tcp,self``), and every byte between hosts
crosses the veth links (:meth:`tx_bytes` counts them).

Needs root (network and UTS namespaces), iproute2 (``ip``, ``tc``) and
util-linux's ``unshare``; :func:`why_unavailable` says what is missing.

    with Cluster(hosts=2, rate="1gbit") as cluster:
        subprocess.run(cluster.mpiexec(["python", "train.py"], ranks_per_host=1), check=True)
        print(cluster.tx_bytes())
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile

__all__ = ["Cluster", "why_unavailable"]

_LAUNCHER = """#!/bin/sh
# Hydra's ssh launcher runs: THIS [ssh options] HOST COMMAND...; run COMMAND in HOST's namespace.
while [ "${1#-}" != "$1" ]; do shift; done
host=$1; shift
case "$host" in
%s
  *) echo "plugtorch netns launcher: unknown host $host" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c "hostname $name; exec $*"
"""


def _run(*cmd: str) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def why_unavailable(shaping: bool = False) -> str | None:
    """Why a :class:`Cluster` cannot be built here (None if it can)."""
    for tool in ("ip", "unshare") + (("tc",) if shaping else ()):
        if shutil.which(tool) is None:
            return f"`{tool}` is not on PATH (iproute2 / util-linux)"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"ptprobe{os.getpid()}"
    try:
        _run("ip", "netns", "add", probe)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        return f"`ip netns add` does not work here ({e})"
    try:
        _run("ip", "netns", "exec", probe, "unshare", "--uts", "true")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        return f"`unshare --uts` does not work here ({e})"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


class Cluster:
    """``hosts`` namespaces ``h1..hN`` on one bridge; see the module docstring.

    rate: None (unshaped veth links) or a ``tc`` rate such as ``"1gbit"``, applied to each
    host's outgoing traffic, so every link carries at most that much each way.
    """

    def __init__(self, hosts: int = 2, rate: str | None = None) -> None:
        if hosts < 1:
            raise ValueError(f"Cluster: hosts must be at least 1, got {hosts}")
        pid = os.getpid()
        self.hosts, self.rate = hosts, rate
        self.prefix = f"pt{pid % 100000}"  # interface names must fit in 15 characters
        subnet = f"10.{200 + pid % 50}.{(pid // 50) % 250}"
        self.namespaces = [f"{self.prefix}-h{i}" for i in range(1, hosts + 1)]
        self.addresses = [f"{subnet}.{i}" for i in range(1, hosts + 1)]
        self.links = [f"{self.prefix}e{i}" for i in range(1, hosts + 1)]
        self.switch = f"{self.prefix}-sw"
        self.tmp: str | None = None  # the launcher's folder, while the cluster exists
        self.launcher = ""

    def __enter__(self) -> Cluster:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create(self) -> None:
        sw = ("ip", "netns", "exec", self.switch)
        _run("ip", "netns", "add", self.switch)
        _run(*sw, "ip", "link", "add", "br0", "type", "bridge")
        _run(*sw, "ip", "link", "set", "br0", "up")
        for i, (ns, addr, link) in enumerate(zip(self.namespaces, self.addresses, self.links), 1):
            inside = ("ip", "netns", "exec", ns)
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", link, "netns", ns, "type", "veth", "peer", "name", f"p{i}",
                 "netns", self.switch)
            _run(*sw, "ip", "link", "set", f"p{i}", "master", "br0")
            _run(*sw, "ip", "link", "set", f"p{i}", "up")
            _run(*inside, "ip", "addr", "add", f"{addr}/24", "dev", link)
            _run(*inside, "ip", "link", "set", link, "up")
            _run(*inside, "ip", "link", "set", "lo", "up")
            if self.rate:
                _run(*inside, "tc", "qdisc", "add", "dev", link, "root", "handle", "1:", "htb", "default", "10")
                _run(*inside, "tc", "class", "add", "dev", link, "parent", "1:", "classid", "1:10", "htb",
                     "rate", self.rate, "ceil", self.rate, "quantum", "60000")
        self.tmp = tempfile.mkdtemp(prefix="plugtorch-netns-")
        self.launcher = os.path.join(self.tmp, "ssh")
        cases = "\n".join(f"  {addr}) ns={ns}; name=h{i} ;;"
                          for i, (addr, ns) in enumerate(zip(self.addresses, self.namespaces), 1))
        with open(self.launcher, "w") as f:
            f.write(_LAUNCHER % cases)
        os.chmod(self.launcher, 0o755)

    def close(self) -> None:
        for ns in self.namespaces + [self.switch]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def mpiexec(self, argv: list[str], ranks_per_host: int = 1, env: dict[str, object] | None = None,
                mpiexec: str | None = None) -> list[str]:
        """The command that runs ``argv`` on every host, launched from host 1 as on a cluster:
        ``mpiexec -hosts ADDR:K,... -launcher ssh -launcher-exec SCRIPT -genv UCX_TLS tcp,self``."""
        mpiexec = mpiexec or shutil.which("mpiexec") or "mpiexec"
        hosts = ",".join(f"{a}:{ranks_per_host}" for a in self.addresses)
        settings = {"UCX_TLS": "tcp,self", **(env or {})}
        genv = [x for k, v in settings.items() for x in ("-genv", k, str(v))]
        launch = [mpiexec, "-hosts", hosts, "-n", str(ranks_per_host * self.hosts), "-launcher", "ssh",
                  "-launcher-exec", self.launcher, *genv, *argv]
        return ["ip", "netns", "exec", self.namespaces[0], "unshare", "--uts", "sh", "-c",
                "hostname h1; exec " + " ".join(shlex.quote(a) for a in launch)]

    def tx_bytes(self) -> list[int]:
        """Bytes each host has sent over its link so far."""
        return [int(_run("ip", "netns", "exec", ns, "cat", f"/sys/class/net/{link}/statistics/tx_bytes"))
                for ns, link in zip(self.namespaces, self.links)]
