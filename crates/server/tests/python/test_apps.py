"""Released applications that use Redis, end to end against `halflife serve`.

- RQ (job queue): jobs, a burst worker, results kept in streams, job dependencies.

Each is skipped when its package is not installed (`.ci/run` installs them).
"""

import importlib
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
