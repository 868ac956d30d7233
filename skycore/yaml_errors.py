"""A YAML syntax error told without quoting the file: PyYAML's own message quotes the
offending line, which may hold a secret (a target file's keys, a task's envs)."""

from __future__ import annotations

import yaml


def yaml_problem(error: yaml.YAMLError, unnamed: str = "syntax error") -> str:
    """``' at line L, column C: PROBLEM'`` for ``error`` (without the place when PyYAML
    gives none; ``unnamed`` when it names no problem), to follow "is not valid YAML"."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{where}: {getattr(error, 'problem', None) or unnamed}"
