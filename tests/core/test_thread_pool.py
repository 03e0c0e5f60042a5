"""The native kernels' thread pool, shared with NumPy's OpenBLAS (native/threadpool.c, blas_threads.py).

The split kernels must give the one-thread results bit for bit (each plane, image or element
range is computed as it is alone); OpenBLAS's jobs must run on the pool and give what its own
threads give; a forked child, threads calling BLAS at once, and the opt-out must all work. The
process-level checks run in subprocesses with a timeout, so a hang fails instead of stalling.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from plugtorch_backends.numpy_backend import native

import plugtorch
import plugtorch.nn.functional as F

pytestmark = pytest.mark.skipif(not native.enabled(), reason=native.status())

if native.enabled():
    from plugtorch_backends.numpy_backend.native import _kernels


def _training_arrays(dtype):
    """Forward, gradients and an Adam step of a conv / max-pool / activation stack whose arrays
    are large enough to split (the pool splits only jobs of 32K elements or more)."""
    plugtorch.manual_seed(0)
    x = plugtorch.randn(8, 3, 66, 66, dtype=dtype)
    x[0, 0, :4, :4] = float("nan")  # max-pool windows whose maximum is NaN
    conv = plugtorch.nn.Conv2d(3, 4, 3).to(dtype)
    fc = plugtorch.nn.Linear(4 * 32 * 32, 8).to(dtype)
    opt = plugtorch.optim.Adam(list(conv.parameters()) + list(fc.parameters()), lr=1e-3)
    x.requires_grad_(True)
    h = F.max_pool2d(F.relu(conv(x)), 2)
    out = fc(h.flatten(1)).tanh().sigmoid()
    out.sum().backward()
    opt.step()
    params = [p.detach().numpy().copy() for p in list(conv.parameters()) + list(fc.parameters())]
    return [out.detach().numpy(), x.grad.numpy(), h.detach().numpy()] + params


@pytest.mark.parametrize("dtype", [plugtorch.float32, plugtorch.float64])
def test_split_kernels_give_the_one_thread_results_bit_for_bit(dtype, native_pool_width, monkeypatch):
    # the native GEMM runs only where BLAS has one thread, and its convolution gradients sum in another
    # order than BLAS and fold: it is held off in both runs, so the pool's split kernels are compared
    from plugtorch_backends.numpy_backend.native import gemm
    monkeypatch.setattr(gemm, "ON", False)
    one = native_pool_width(1, lambda: _training_arrays(dtype))
    calls = _kernels.pool_info()[2]
    three = native_pool_width(3, lambda: _training_arrays(dtype))
    assert _kernels.pool_info()[2] > calls, "nothing was split: the arrays are too small to test the pool"
    for a, b in zip(one, three):
        np.testing.assert_array_equal(a, b)  # NaNs compare equal where both have them


def _run(code: str, env_extra: dict | None = None, timeout: int = 120, prelude: bool = True) -> str:
    env = {**os.environ, **(env_extra or {})}
    source = (textwrap.dedent(PRELUDE) if prelude else "") + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


PRELUDE = """
    import numpy as np, plugtorch
    from threadpoolctl import threadpool_limits
    from plugtorch_backends.numpy_backend import native
    from plugtorch_backends.numpy_backend.native import _kernels, blas_threads
    plugtorch.zeros(1)
    if not blas_threads.STATUS.startswith("on"):
        print("SKIP", blas_threads.STATUS); raise SystemExit(0)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 384), dtype=np.float32)
    b = rng.standard_normal((384, 640), dtype=np.float32)
"""


def _skip_if_off(out: str) -> str:
    if out.startswith("SKIP"):
        pytest.skip(f"OpenBLAS's jobs are not on the pool here: {out[5:].strip()}")
    return out


def test_openblas_runs_its_jobs_on_the_pool_and_gets_its_own_threads_results():
    out = _skip_if_off(_run("""
        import ctypes
        with threadpool_limits(limits=2, user_api="blas"):
            calls = _kernels.pool_info()[2]
            pooled = a @ b
            assert _kernels.pool_info()[2] > calls, "OpenBLAS did not call the pool"
            for lib in blas_threads._libraries:  # OpenBLAS's own threads, for the reference
                blas_threads._symbol(lib, "set_threads_callback_function")(None)
            own = a @ b
        np.testing.assert_array_equal(pooled, own)
        print("ok")
    """, {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}))
    assert out.strip() == "ok"


def test_width_follows_the_blas_thread_count():
    out = _skip_if_off(_run("""
        with threadpool_limits(limits=1, user_api="blas"):
            one = _kernels.pool_info()[0]
        with threadpool_limits(limits=2, user_api="blas"):
            two = _kernels.pool_info()[0]
        print(one, two)
    """, {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}))
    assert out.split() == ["1", "2"]


def test_a_forked_child_starts_a_pool_of_its_own():
    out = _skip_if_off(_run("""
        import multiprocessing as mp
        import plugtorch.nn.functional as F
        x = plugtorch.randn(16, 8, 64, 64)
        want_pool, want_mm = F.max_pool2d(x, 2).numpy(), a @ b  # the parent's workers now exist
        assert _kernels.pool_info()[1] >= 1

        def child(q):
            q.put((F.max_pool2d(x, 2).numpy(), a @ b, _kernels.pool_info()[1]))

        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        pool, mm, workers = q.get(timeout=60)
        p.join(60)
        assert p.exitcode == 0, p.exitcode
        np.testing.assert_array_equal(pool, want_pool)
        np.testing.assert_allclose(mm, want_mm, rtol=1e-5, atol=1e-4)
        print("ok", workers)
    """, {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}))
    assert out.split()[0] == "ok" and int(out.split()[1]) >= 1


def test_blas_and_kernels_from_several_python_threads_at_once():
    out = _skip_if_off(_run("""
        import threading
        import plugtorch.nn.functional as F
        x = plugtorch.randn(16, 8, 64, 64)
        want_pool, want_mm = F.max_pool2d(x, 2).numpy(), a @ b
        bad = []

        def work():
            for _ in range(20):
                if not np.array_equal(F.max_pool2d(x, 2).numpy(), want_pool):
                    bad.append("pool")
                if not np.allclose(a @ b, want_mm, rtol=1e-5, atol=1e-4):
                    bad.append("matmul")

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not bad, bad
        print("ok")
    """, {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}))
    assert out.strip() == "ok"


def test_the_opt_out_leaves_openblas_alone_and_the_kernels_on_one_thread():
    out = _run("""
        import plugtorch
        from plugtorch_backends.numpy_backend.native import _kernels, blas_threads
        plugtorch.zeros(1)
        print(blas_threads.STATUS, "|", _kernels.pool_info()[0])
    """, {"PLUGTORCH_SHARE_BLAS_THREADS": "0", "OPENBLAS_NUM_THREADS": "2"}, prelude=False)
    status, width = out.split("|")
    assert status.strip() == "off: PLUGTORCH_SHARE_BLAS_THREADS=0" and width.strip() == "1"


def test_the_pool_alone_under_concurrent_calls_sleeping_workers_and_fork(tmp_path):
    """threadpool_stress.c against threadpool.c, built here: every job runs once, all jobs of a
    call at once (a barrier that hangs otherwise), from three calling threads, across sleeps
    and a fork."""
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if cc is None or sys.platform == "win32":
        pytest.skip("needs a C compiler and pthreads to build the stress run")
    native_dir = pathlib.Path(__file__).resolve().parents[2] / "backends" / "numpy_backend" / "native"
    if not (native_dir / "threadpool.c").exists():
        pytest.skip(f"the pool's source is not beside the tests ({native_dir})")
    exe = tmp_path / "stress"
    subprocess.run([cc, "-O2", "-std=c11", "-I", str(native_dir), str(native_dir / "threadpool.c"),
                    str(pathlib.Path(__file__).with_name("threadpool_stress.c")), "-o", str(exe), "-lpthread"],
                   check=True, capture_output=True, timeout=120)
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stdout + done.stderr
