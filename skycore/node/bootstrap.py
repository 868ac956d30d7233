"""The start of skycore's mount program on a node (python3 standard library only).

A node gets the program as ONE text (``skycore.node.mountd_program``): the line
``MODULES = {import name: source}`` holding every module of skycore/node/mountd, then this
file. It serves each module under its import name (a name with modules below it is a
package) and runs ``skycore.node.mountd.cli.main`` with the command line.

Each module is compiled once per version of its source and Python, into
~/.cache/skycore-mountd (marshal): a node runs the program for every mount batch, drain and
probe, and compiling its 67 KB cost about 0.1 s of CPU each time. A cache file that cannot be
read or holds no code is compiled again; one that cannot be written is skipped.

No ``from __future__`` import here: the data line comes before this file. Annotations that
python3 < 3.10 cannot evaluate are strings.
"""

import contextlib
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import tempfile
import types

MODULES: "dict[str, str]" = globals().get("MODULES", {})
"""{import name: source} of the program's modules, set by the line before this file (none
when this file runs alone)."""


def cache_dir() -> "str | None":
    """~/.cache/skycore-mountd (None when there is no absolute home)."""
    home = os.path.expanduser("~")
    return os.path.join(home, ".cache", "skycore-mountd") if os.path.isabs(home) else None


def cache_key(name: str, source: str) -> str:
    """The cache file name of module ``name``: its source's hash and Python's magic number."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    return f"{name}-{digest}-{importlib.util.MAGIC_NUMBER.hex()}.bin"


def load_cached(path: str) -> "types.CodeType | None":
    """The code object in cache file ``path`` (None when missing or damaged)."""
    try:
        with open(path, "rb") as f:
            code = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, types.CodeType) else None


def store_cached(folder: str, key: str, code: types.CodeType) -> None:
    """Write ``code`` to the cache file ``key`` atomically; skipped when it cannot be written."""
    tmp = None
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=key + ".")
        with os.fdopen(fd, "wb") as f:
            marshal.dump(code, f)
        os.replace(tmp, os.path.join(folder, key))
    except OSError:
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


class Modules(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    """Finds and loads the modules of ``sources`` ({import name: source}), each compiled
    once per version (``get_code``); importlib does the rest."""

    def __init__(self, sources: "dict[str, str]") -> None:
        self.sources = sources
        self.cache = cache_dir()

    def find_spec(
        self,
        fullname: str,
        path: object = None,
        target: "types.ModuleType | None" = None,
    ) -> "importlib.machinery.ModuleSpec | None":
        if fullname not in self.sources:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def is_package(self, fullname: str) -> bool:
        return any(name.startswith(fullname + ".") for name in self.sources)

    def get_source(self, fullname: str) -> str:
        return self.sources[fullname]

    def get_code(self, fullname: str) -> types.CodeType:
        source = self.sources[fullname]
        key = cache_key(fullname, source)
        code = load_cached(os.path.join(self.cache, key)) if self.cache else None
        if code is None:
            code = compile(source, "<skycore " + fullname + ">", "exec", dont_inherit=True)
            if self.cache:
                store_cached(self.cache, key, code)
        return code


def main() -> int:
    """Serve MODULES, then run the program's command line."""
    sys.meta_path.insert(0, Modules(MODULES))
    from skycore.node.mountd.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
