"""Managed jobs: a task on its own cluster, watched by a detached controller that recovers it
from preemptions (``skycore jobs launch|queue|logs|cancel``).

Modules: ``state`` (job states and their SQLite tables), ``recovery`` (strategies and retry
policy), ``controller`` (the per-job process), ``core`` (the API the CLI calls, orphan
adoption), ``cli`` (the click group), ``paths`` (the job's files).
"""
