"""``python -m plugtorch.distributed.run``: torchrun's command line, on top of ``mpiexec``.

One ``mpiexec`` starts every worker of the job through :mod:`._bootstrap`, which gives
each the variables torchrun gives (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ...) and
then runs the script. MPI is the rendezvous, so there is no store or agent: ``--rdzv-*``
options are accepted and only name the job (``--rdzv-id``) and its address
(``--rdzv-endpoint``). With ``--max-restarts K`` a job whose worker fails (an exit status
other than 0, or the stall watchdog's abort) is started again, whole, up to K times,
with ``TORCHELASTIC_RESTART_COUNT`` counting the restarts, as torchrun does.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid

_PREFIX = "[plugtorch.distributed.run]"


def _log(msg: str) -> None:
    sys.stderr.write(f"{_PREFIX} {msg}\n")
    sys.stderr.flush()


def find_mpiexec() -> str:
    """``PLUGTORCH_MPIEXEC``, else the one installed beside this Python (pip's mpich), else PATH's."""
    explicit = os.environ.get("PLUGTORCH_MPIEXEC")
    if explicit:
        return explicit
    here = pathlib.Path(sys.executable).parent
    for name in ("mpiexec", "mpirun"):
        if (here / name).exists():
            return str(here / name)
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit(f"{_PREFIX} no mpiexec found: pip install mpich mpi4py, or set PLUGTORCH_MPIEXEC")


def _both(parser, name: str, **kw):
    """An option under torchrun's two spellings, ``--a-b`` and ``--a_b``."""
    spellings = [f"--{name}"] + ([f"--{name.replace('-', '_')}"] if "-" in name else [])
    parser.add_argument(*spellings, **kw)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m plugtorch.distributed.run",
                                description="torchrun's launcher on top of mpiexec")
    _both(p, "nnodes", default="1", help="nodes, N or MIN:MAX (elastic ranges run at MAX)")
    _both(p, "nproc-per-node", default="1", help="workers per node: an integer, or auto/cpu/gpu (1 here)")
    _both(p, "node-rank", type=int, default=0, help="must be 0: one launcher starts every node's workers")
    _both(p, "master-addr", default="127.0.0.1", help="MASTER_ADDR given to the workers")
    _both(p, "master-port", type=int, default=29500, help="MASTER_PORT given to the workers")
    p.add_argument("--hostfile", help="mpiexec's host file (one host per line), for --nnodes > 1")
    _both(p, "max-restarts", type=int, default=0, help="restart the whole job this many times on failure")
    _both(p, "rdzv-backend", default="static", help="accepted; MPI is the rendezvous")
    _both(p, "rdzv-endpoint", default="", help="HOST[:PORT]: sets MASTER_ADDR/MASTER_PORT")
    _both(p, "rdzv-id", default="none", help="the job id, TORCHELASTIC_RUN_ID")
    _both(p, "rdzv-conf", default="", help="accepted and ignored")
    p.add_argument("--standalone", action="store_true",
                   help="one node, localhost, a free port and a fresh run id")
    _both(p, "monitor-interval", type=float, default=0.1, help="accepted and ignored")
    p.add_argument("--role", default="default", help="ROLE_NAME given to the workers")
    p.add_argument("-m", "--module", action="store_true", help="run the target as python -m does")
    p.add_argument("training_script", help="the script (or module, with -m) every worker runs")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def _nproc(value: str) -> int:
    if value in ("auto", "cpu", "gpu", "xpu"):
        return 1  # torchrun's auto/gpu count devices; this CPU build has none, so one worker
    if not value.isdigit() or int(value) < 1:
        raise SystemExit(f"{_PREFIX} --nproc-per-node must be a positive integer or auto, got {value!r}")
    return int(value)


def _nnodes(value: str) -> int:
    top = value.split(":")[-1]
    if not top.isdigit() or int(top) < 1:
        raise SystemExit(f"{_PREFIX} --nnodes must be N or MIN:MAX with positive integers, got {value!r}")
    return int(top)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan(args) -> tuple[list[str], dict[str, str]]:
    """The ``mpiexec`` command line and the environment shared by every worker."""
    nproc, nnodes = _nproc(args.nproc_per_node), _nnodes(args.nnodes)
    addr, port, run_id = args.master_addr, args.master_port, args.rdzv_id
    if args.standalone:
        if nnodes != 1:
            raise SystemExit(f"{_PREFIX} --standalone runs one node; drop --nnodes {args.nnodes}")
        addr, port, run_id = "localhost", _free_port(), str(uuid.uuid4())
    elif args.rdzv_endpoint:
        host, _, p = args.rdzv_endpoint.rpartition(":") if ":" in args.rdzv_endpoint else (
            args.rdzv_endpoint, "", "")
        addr, port = host or addr, int(p) if p else port
    if args.node_rank != 0:
        raise SystemExit(f"{_PREFIX} --node-rank {args.node_rank}: with mpiexec one launcher, on node 0, "
                         "starts the workers of every node; run it once, with --hostfile")
    cmd = [find_mpiexec(), "-n", str(nproc * nnodes)]
    if nnodes > 1:
        if not args.hostfile:
            raise SystemExit(f"{_PREFIX} --nnodes {nnodes} needs --hostfile naming the nodes: "
                             "mpiexec starts every node's workers from here")
        cmd += ["-f", args.hostfile, "-ppn", str(nproc)]
    elif args.hostfile:
        cmd += ["-f", args.hostfile, "-ppn", str(nproc)]
    cmd += [sys.executable, "-m", "plugtorch.distributed._bootstrap"]
    cmd += (["-m"] if args.module else []) + [args.training_script, *args.training_script_args]
    env = {"MASTER_ADDR": addr, "MASTER_PORT": str(port), "TORCHELASTIC_RUN_ID": run_id,
           "TORCHELASTIC_MAX_RESTARTS": str(args.max_restarts), "PLUGTORCH_RUN_NPROC_PER_NODE": str(nproc),
           "PLUGTORCH_RUN_ROLE": args.role}
    return cmd, env


def _failures(status_dir: str) -> list[dict]:
    out = []
    for path in pathlib.Path(status_dir).glob("rank-*.json"):
        rec = json.loads(path.read_text())
        if rec["exitcode"] != 0:
            out.append(rec)
    return sorted(out, key=lambda r: r["time"])


def _describe(rec: dict) -> str:
    code = rec["exitcode"]
    how = f"exitcode: {code}" if code >= 0 else f"exitcode: {code} (killed by signal {-code})"
    return f"rank: {rec['rank']} (local_rank: {rec['local_rank']}), host: {rec['host']}, {how}"


def run(args) -> int:
    """Start the job, restarting it on failure up to ``--max-restarts`` times; the exit status."""
    cmd, env = plan(args)
    for attempt in range(args.max_restarts + 1):
        with tempfile.TemporaryDirectory(prefix="plugtorch-run-") as status_dir:
            proc_env = {**os.environ, **env, "TORCHELASTIC_RESTART_COUNT": str(attempt),
                        "PLUGTORCH_RUN_STATUS_DIR": status_dir}
            try:
                rc = subprocess.call(cmd, env=proc_env)
            except KeyboardInterrupt:
                return 130
            if rc == 0:
                return 0
            failed = _failures(status_dir)
        first = _describe(failed[0]) if failed else f"mpiexec exit status {rc} (no worker recorded one)"
        if attempt < args.max_restarts:
            _log(f"worker group failed (attempt {attempt}): {first}; restarting "
                 f"({attempt + 1}/{args.max_restarts})")
            continue
        lines = [f"  [{i}]: {_describe(r)}" for i, r in enumerate(failed)] or [f"  {first}"]
        target = " ".join(cmd[cmd.index("plugtorch.distributed._bootstrap") + 1:])
        _log(f"{target} FAILED after {attempt} restart{'s' if attempt != 1 else ''}\n"
             f"Root Cause (first observed failure):\n  {first}\n"
             "Failures:\n" + "\n".join(lines))
    return 1


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run(parser().parse_args(argv)))


if __name__ == "__main__":
    main()
