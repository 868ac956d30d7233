"""Which files of a local folder go into a bucket: honours .skyignore, else .gitignore files.

Rules (as SkyPilot): when the folder has a ``.skyignore`` at its top, only that file decides;
otherwise every ``.gitignore`` in the tree applies to its own folder and below (the deepest
match wins, so negations work). ``.git`` is never uploaded.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pathspec
from pathspec import GitIgnoreSpec

from skycore.storage.common import StorageSpecError


def _load(path: Path) -> GitIgnoreSpec | None:
    try:
        return GitIgnoreSpec.from_lines(path.read_text().splitlines())
    except OSError:
        return None


def _ignored(rel: str, is_dir: bool, specs: list[tuple[str, pathspec.PathSpec]]) -> bool:
    """Deepest spec with a verdict decides (git's precedence)."""
    for base, spec in reversed(specs):
        sub = rel[len(base) + 1 :] if base else rel
        candidate = sub + "/" if is_dir else sub
        result = spec.check_file(candidate)
        if result.include is not None:
            return bool(result.include)
    return False


def _unreadable(path: Path, e: OSError) -> StorageSpecError:
    if e.errno == errno.ELOOP:
        why = "is a symbolic link loop"
        fix = "remove or fix the link"
    else:
        why = f"cannot be read ({e.strerror or e})"
        fix = "fix its permissions, or list it in .skyignore to leave it out"
    return StorageSpecError(
        f"source: {path} {why}, so the folder cannot be uploaded; {fix} (or list it in "
        ".skyignore / .gitignore)."
    )


def list_upload_files(root: str | Path) -> list[str]:
    """Relative POSIX paths of the files under ``root`` that should be uploaded, sorted.

    Symbolic links are followed; a link loop (or a link back to a folder being listed) or an
    unreadable file or folder is a StorageSpecError naming the path, never a traceback."""
    root = Path(root)
    if root.is_file():
        return [root.name]
    skyignore = root / ".skyignore"
    use_sky = skyignore.is_file()
    top: list[tuple[str, pathspec.PathSpec]] = []
    if use_sky:
        spec = _load(skyignore)
        if spec:
            top.append(("", spec))
    out: list[str] = []
    # stack of (relative dir, specs in force there)
    stack: list[tuple[str, list[tuple[str, pathspec.PathSpec]]]] = [("", top)]
    # real path of every folder on the way down to each stacked folder (cycle detection)
    ancestors: dict[str, frozenset[str]] = {"": frozenset({os.path.realpath(root)})}
    while stack:
        rel_dir, specs = stack.pop()
        abs_dir = root / rel_dir if rel_dir else root
        if not use_sky:
            spec = _load(abs_dir / ".gitignore")
            if spec:
                specs = [*specs, (rel_dir, spec)]
        try:
            entries = list(os.scandir(abs_dir))
        except OSError as e:
            raise _unreadable(abs_dir, e) from None
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.name == ".git":
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=True)
                is_file = not is_dir and entry.is_file(follow_symlinks=True)
            except OSError as e:
                if _ignored(rel, False, specs):
                    continue
                raise _unreadable(Path(entry.path), e) from None
            if _ignored(rel, is_dir, specs):
                continue
            if is_dir:
                real = os.path.realpath(entry.path)
                if real in ancestors[rel_dir]:
                    raise _unreadable(Path(entry.path), OSError(errno.ELOOP, "link loop"))
                ancestors[rel] = ancestors[rel_dir] | {real}
                stack.append((rel, specs))
            elif is_file:
                if not os.access(entry.path, os.R_OK):
                    raise _unreadable(Path(entry.path), OSError(errno.EACCES, "Permission denied"))
                out.append(rel)
    return sorted(out)
