"""Released applications that use Redis, end to end against `halflife serve`.

- Celery (task queue): Redis as broker and as result backend; the worker is a separate
  process; the result backend waits for a task's result over pub/sub.
- RQ (job queue): jobs, a burst worker, results kept in streams, job dependencies.

Each is skipped when its package is not installed (`.ci/run` installs them).
"""

import importlib
import subprocess
import sys
import textwrap
import time

import pytest


def module(tmp_path, name, source):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def test_celery_with_redis_broker_and_result_backend(server, tmp_path):
    pytest.importorskip("celery")
    url = f"redis://127.0.0.1:{server.port}/0"
    tasks = module(
        tmp_path,
        "hl_celery_tasks",
        f"""
        from celery import Celery

        app = Celery("hl_celery_tasks", broker="{url}", backend="{url}")
        app.conf.broker_connection_retry_on_startup = True

        @app.task
        def add(x, y):
            return x + y
        """,
    )
    log = open(tmp_path / "worker.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "hl_celery_tasks", "worker", "-P", "solo",
         "-c", "1", "-l", "info"],
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        results = [tasks.add.delay(i, i) for i in range(20)]
        assert [r.get(timeout=120) for r in results] == [2 * i for i in range(20)]
        # A group's results, collected by the backend.
        from celery import group

        g = group(tasks.add.s(i, 1) for i in range(5))()
        assert g.get(timeout=120) == [1, 2, 3, 4, 5]
    except Exception:
        print((tmp_path / "worker.log").read_text())
        raise
    finally:
        worker.terminate()
        worker.wait(timeout=60)


def test_rq_jobs_results_and_dependencies(server, tmp_path):
    rq = pytest.importorskip("rq")
    jobs = module(
        tmp_path,
        "hl_rq_jobs",
        """
        def add(x, y):
            return x + y

        def fail():
            raise ValueError("boom")
        """,
    )
    conn = server.client()
    q = rq.Queue("default", connection=conn)
    a = q.enqueue(jobs.add, 2, 3)
    b = q.enqueue(jobs.add, 10, 20, depends_on=a)
    bad = q.enqueue(jobs.fail)
    worker = rq.Worker([q], connection=conn)
    sys.path.insert(0, str(tmp_path))
    try:
        worker.work(burst=True)
    finally:
        sys.path.remove(str(tmp_path))
    assert a.return_value() == 5
    assert b.return_value() == 30
    bad.refresh()
    assert bad.is_failed
    # Results are kept in a stream per job (XADD/XREVRANGE).
    assert [r.type for r in a.results()] == [rq.results.Result.Type.SUCCESSFUL]
    assert q.failed_job_registry.count == 1
    deadline = time.monotonic() + 10
    while q.count and time.monotonic() < deadline:
        time.sleep(0.05)
    assert q.count == 0
