"""Managed jobs: a task on its own cluster, watched by a detached controller that recovers it
from preemptions (``skycore jobs launch|queue|logs|cancel``).

Modules: ``core`` (the API the CLI calls, orphan adoption), ``controller`` (the per-job
process), ``job_cluster`` (the job's cluster: its nodes through ``skycore.core``, drains and
teardown), ``recovery`` (strategies and retry policy), ``paths`` (the job's files). Their
statuses and tables are ``skycore.state.managed_jobs``; their click group is
``skycore.cli.managed_jobs``.
"""
