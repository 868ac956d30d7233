"""A YAML's problems told well: a syntax error without quoting the file (PyYAML's own message
quotes the offending line, which may hold a secret: a target file's keys, a task's envs), a
pydantic error as a line naming the field path, and every problem of a document at once
(``Problems``: one problem as one paragraph, several as one line each)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from skycore.errors import UserError


def yaml_problem(error: yaml.YAMLError, unnamed: str = "syntax error") -> str:
    """``' at line L, column C: PROBLEM'`` for ``error`` (without the place when PyYAML
    gives none; ``unnamed`` when it names no problem), to follow "is not valid YAML"."""
    mark = getattr(error, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{where}: {getattr(error, 'problem', None) or unnamed}"


def short(value: Any) -> str:
    """``repr(value)``, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def did_you_mean(key: str, model: type[BaseModel]) -> str:
    """The field of ``model`` closest to ``key``, or the list of the fields it takes (those a
    model only refuses, never dumped, left out)."""
    close = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    fields = [name for name, f in model.model_fields.items() if not f.exclude]
    return "valid fields: " + ", ".join(f"'{c}'" for c in fields)


def pydantic_problems(
    e: ValidationError,
    model: type[BaseModel],
    prefix: str = "",
    models: Mapping[tuple[str, ...], type[BaseModel]] | None = None,
) -> list[str]:
    """One readable line per pydantic error, field path first (``models``: the model of each
    nested mapping, by its path, for "did you mean")."""
    out = []
    for err in e.errors():
        loc = [str(p) for p in err["loc"]]
        path = prefix + ".".join(loc) if loc else prefix.rstrip(".") or "(top level)"
        if err["type"] == "extra_forbidden":
            parent = (models or {}).get(tuple(loc[:-1]), model)
            out.append(f"unknown field '{path}' ({did_you_mean(loc[-1], parent)})")
        elif err["type"] == "literal_error":
            expected = err.get("ctx", {}).get("expected", "")
            out.append(f"{path}: {short(err['input'])} is not one of {expected}")
        elif err["type"] == "missing":
            out.append(f"{path}: required field is missing")
        elif err["type"] == "value_error":
            out.append(f"{path}: {err.get('ctx', {}).get('error', err['msg'])}")
        else:
            msg = err["msg"].replace("Input should be", "should be")
            out.append(f"{path}: {msg} (got {short(err['input'])})")
    return out


class Problems:
    """Every problem found in one document, in the order found. A problem is a line naming
    the field (from ``pydantic_problems``) or a whole message with its own fix."""

    def __init__(self) -> None:
        self._found: list[tuple[str, bool]] = []  # (text, has its own fix)

    def __bool__(self) -> bool:
        return bool(self._found)

    def __len__(self) -> int:
        return len(self._found)

    def lines(self, lines: list[str]) -> None:
        """Problems told as a field and what is wrong (the fix line comes at the end)."""
        self._found += [(line, False) for line in lines]

    def add(self, text: str) -> None:
        """A problem told as a whole message, with its fix."""
        self._found.append((text, True))

    def message(self, error: UserError) -> None:
        """A user error's message, or each of its ``problems`` when it carries several."""
        several = getattr(error, "problems", None)
        for text in several if isinstance(several, list) and several else [error.message]:
            self.add(str(text))

    def text(self) -> str:
        """One problem as one paragraph; several as ``N problems:`` and one ``- `` line each,
        then the fix line."""
        found = [(" ".join(text.split()), own_fix) for text, own_fix in self._found]
        if len(found) == 1:
            text, own_fix = found[0]
            return text if own_fix else f"{text}. Fix it and run again."
        n = len(found)
        listed = "\n".join(f"- {text.rstrip('.')}" for text, _ in found)
        return f"{n} problems:\n{listed}\nFix these {n} problems and run again."


class ProblemsError(UserError):
    """A user error whose message keeps its lines: one per problem (``Problems.text``)."""

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message, exit_code=exit_code)
        self.args = ("\n".join(" ".join(line.split()) for line in message.split("\n")),)
