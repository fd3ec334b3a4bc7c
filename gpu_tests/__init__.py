"""The GPU suite: the offload-reload check on real servers and its engine-side instruments (README.md).

A repository package, not part of the wheel (it imports ``vllm_devclient``; nothing there imports it). Its
stages, each handing one data type to the next:

1. plan: ``runner/jobs.py`` (the tiny families), ``runner/real_plan.py`` (real size), ``runner/budget.py``;
   hands on ``Job`` values.
2. run and measure: ``runner/launch.py`` (a process per job), ``offload_check/case.py`` (one server),
   ``offload_check/check.py`` (the sequence; never judges); hands on a measured ``OffloadCheckReport``.
3. judge: ``offload_check/judge.py`` with ``assertions.py`` and ``defects.py``, no I/O; hands on the same
   report, judged (a committed one can be judged again: ``judge.rejudge``).
4. report: ``offload_check/report.py`` (the models), ``runner/collect.py`` (commits a run to
   ``results/NAME/``; ``--rejudge`` never turns a committed failure into a pass).
5. tables: ``runner/tables.py`` and ``runner/proof_tables.py``, from the committed runs into README.md.

``kv_proof/`` holds the instruments the engine loads, ``upstream/`` vLLM's own matrix as parsed data, ``rl/``
the RL runner, ``tests/`` the CPU tests of all of it (``make test`` runs them).
"""
