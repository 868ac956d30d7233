"""Paths a user gives (the task file, ``workdir``, ``--workdir``, file_mounts sources and
destinations): one checked resolver, so a bad string is a clear error, never a traceback.

- ``resolve_local_path(value, field)``: a local path that must exist, ``~`` expanded and
  symbolic links resolved. Every failure (no such file, name too long, symbolic link loop,
  ``~user`` of an unknown user, permission denied, a file where a folder is needed, a NUL
  byte, an empty string, anything else the OS says) is a ``UserPathError`` naming the field
  and the path (shortened if long), what is wrong and what to do.
- ``check_node_path(value, field)``: a path on the nodes (a destination). It is not looked up
  here; it only has to be a path a node can hold (not empty, no NUL byte, within the limits).
- ``path_exists(value)``: a probe that never raises (is this string an existing path?).
- ``os_error_problem(err, path)``: (what is wrong, what to do) for an OSError met while
  reading a user's path, in the same words (e.g. reading the task file).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import NoReturn

from skycore.errors import UserPathError as UserPathError

MAX_PATH_BYTES = 4096
"""Linux PATH_MAX: the longest path (in bytes, with its terminating NUL: so 4095 usable)."""

MAX_NAME_BYTES = 255
"""Linux NAME_MAX: the longest name between two slashes, in bytes."""

_HEAD, _TAIL = 60, 20


def show(value: object) -> str:
    """``value`` as text fit for a one-line message: characters that do not print (NUL, line
    breaks, ...) escaped, and longer than 81 characters shortened to its first 60 + '…' + its
    last 20."""
    text = str(value)
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > _HEAD + _TAIL + 1:
        text = f"{text[:_HEAD]}…{text[-_TAIL:]}"
    return text


def _raise(field: str, value: object, problem: str, fix: str, noun: str) -> NoReturn:
    raise UserPathError(field, show(value), problem, fix, noun)


def _string_problem(text: str) -> tuple[str, str] | None:
    """What makes ``text`` unusable as a path (before looking anything up), or None. Paths
    must be UTF-8: they go into state, YAML and the nodes' scripts (a command-line argument
    with undecodable bytes arrives as lone surrogates)."""
    if text == "":
        return "is an empty string", "Give a path."
    if "\0" in text:
        return (
            "contains a NUL byte (\\0), which no file name can hold",
            "Remove it (look for a stray \\0 or \\x00 escape in the YAML or the shell).",
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return (
            "is not valid UTF-8 (it holds undecodable bytes or lone surrogates)",
            "Rename the file or folder, or retype the path, in UTF-8.",
        )
    return None


def _too_long(text: str) -> str | None:
    """Why ``text`` breaks the length limits (in bytes), or None."""
    size = len(os.fsencode(text))
    if size >= MAX_PATH_BYTES:
        return f"is too long: {size} bytes, more than the {MAX_PATH_BYTES - 1} a path may have"
    longest = max(text.split("/"), key=lambda part: len(os.fsencode(part)))
    name_size = len(os.fsencode(longest))
    if name_size > MAX_NAME_BYTES:
        return (
            f"has a name that is too long: '{show(longest)}' is {name_size} bytes, more than "
            f"the {MAX_NAME_BYTES} a file or folder name may have"
        )
    return None


def _expand_user(text: str, field: str, noun: str) -> str:
    """``text`` with a leading ``~`` or ``~user`` expanded (UserPathError if it cannot be)."""
    if not text.startswith("~"):
        return text
    expanded = os.path.expanduser(text)
    if expanded == text or expanded.startswith("~"):
        user = text[1:].split("/", 1)[0]
        if user:
            _raise(
                field,
                text,
                f"starts with '~{show(user)}', but there is no user '{show(user)}' on this "
                "machine whose home folder it could name",
                "Write the folder in full, or use ~/ for your own home folder.",
                noun,
            )
        _raise(
            field,
            text,
            "starts with '~', but your home folder is not known (HOME is not set)",
            "Write the folder in full, or set HOME.",
            noun,
        )
    return expanded


def _file_on_the_way(path: str) -> str | None:
    """The first part of ``path`` (as written) that exists and is not a folder (for
    ENOTDIR), or None."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        prefix = "/".join(parts[:i])
        try:
            if prefix and os.path.exists(prefix) and not os.path.isdir(prefix):
                return prefix
        except (OSError, ValueError):
            return None
    return None


def os_error_problem(err: OSError, path: str) -> tuple[str, str]:
    """(what is wrong, what to do) for ``err`` met while looking up or reading ``path`` (the
    user's path with ``~`` expanded). Both read after "the path 'X' ..." and after "it ..."."""
    code = err.errno
    if code == errno.ENOENT:
        return (
            "does not exist",
            "Create it or fix the path (relative paths are relative to the current directory).",
        )
    if code == errno.ENAMETOOLONG:
        return (
            _too_long(path) or "is longer than the file system allows",
            "Use a shorter path (or shorter names).",
        )
    if code == errno.ELOOP:
        return (
            "is a symbolic link loop (a link that leads back to itself, directly or through "
            "other links)",
            "Fix or remove the link, or give the path it should lead to.",
        )
    if code in (errno.EACCES, errno.EPERM):
        return (
            "cannot be reached: permission denied (on the path or a folder on the way to it)",
            "Give your user access (chmod/chown) or use another path.",
        )
    if code == errno.ENOTDIR:
        blocker = _file_on_the_way(path)
        where = f"'{show(blocker)}', a part of it," if blocker else "a part of it"
        return (
            f"is not a folder path: {where} is a file, not a folder",
            "Fix the path (a file cannot hold other files).",
        )
    if code == errno.EISDIR:
        return "is a folder, not a file", "Give the path of a file."
    reason = err.strerror or type(err).__name__
    return f"cannot be used ({reason})", "Fix the path."


def resolve_local_path(value: str | os.PathLike[str], field: str) -> Path:
    """The absolute, symlink-free Path of the existing local path ``value`` (``~`` and
    ``~user`` expanded; relative to the current directory). Raises UserPathError naming
    ``field`` on any problem; never lets an OSError/ValueError/RuntimeError through."""
    text = os.fspath(value)
    noun = "local path"
    found = _string_problem(text)
    if found:
        _raise(field, text, *found, noun)
    expanded = _expand_user(text, field, noun)
    try:
        return Path(os.path.realpath(expanded, strict=True))
    except OSError as e:
        _raise(field, text, *os_error_problem(e, expanded), noun)
    except (ValueError, RuntimeError) as e:  # e.g. a character the OS cannot encode
        _raise(field, text, f"cannot be used ({e})", "Fix the path.", noun)


def path_exists(value: str) -> bool:
    """True if ``value`` names an existing file or folder (``~`` expanded); False for anything
    else, including strings that are no valid path at all. Never raises."""
    if _string_problem(value):
        return False
    try:
        return os.path.exists(os.path.expanduser(value))
    except (OSError, ValueError, RuntimeError):
        return False


def check_node_path(value: str, field: str) -> str:
    """``value`` if it can be a path on a node: not empty, no NUL byte, at most 4095 bytes and
    names of at most 255 bytes. Not looked up locally; UserPathError naming ``field``."""
    noun = "destination"
    found = _string_problem(value)
    if found:
        _raise(field, value, *found, noun)
    too_long = _too_long(value)
    if too_long:
        _raise(field, value, too_long, "Use a shorter destination path.", noun)
    return value
