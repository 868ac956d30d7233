"""Programs live in files: skycore/ holds at most ``LIMIT`` lines of programs inside Python
strings.

The rule. A *string expression* is a string or bytes literal, an f-string, literals joined
implicitly, a ``+`` or ``%`` of string expressions (other operands are left as holes), or
``sep.join(...)`` of a list, tuple or generator of them with a literal ``sep``; only the
largest one around a literal is looked at. Each string expression in ``skycore/**/*.py``
counts when it is

1. run as a program: passed to ``exec``, ``eval`` or ``compile``; in a list after ``-c``
   (``["bash", "-c", X]``, ``["python3", "-c", X]``); the first argument of ``os.system`` or
   of a call named ``run``, ``run_output``, ``check_output``, ``check_call``, ``call``,
   ``Popen`` or ``exec_run`` (a command runner or subprocess given a string); or passed with
   ``shell=True``; or
2. shell or Python source by its text: it holds shell syntax (``set -x``, ``&&``, ``||``,
   ``; then``, ``$(``, a here-document ``<<``, ``2>&1``, ``>/dev/null``, a pipe into a
   command `` | cmd``, ``fi``, ``done`` or ``esac`` after ``;`` or alone on a later line, a
   line starting with a common command and an argument: ``cd``, ``echo``, ``printf``,
   ``export``, ``mkdir``, ``rm``, ``python3``, ``bash``, ``rclone`` ... see ``SHELL``), or a
   line that starts Python source (``import x``, ``from x import``, ``def f(``, ``class C``,
   ``if __name__``).

A counted string expression counts as many lines as the larger of its source lines and its
text's lines. Not counted: a string statement (a module's, class's or function's docstring,
an attribute's docstring: it runs nothing), and prose and patterns: anything under
``raise`` or ``assert``, the arguments of ``print``, ``warnings.warn``, a logger's methods
(``debug`` ... ``critical``, ``log``), an exception's constructor (a name ending in
``Error``, ``Exception`` or ``Warning``), argparse's ``ArgumentParser``, ``add_argument``
and ``add_parser`` (a command line's help) and the ``re`` functions. A docstring that code
reads (``__doc__``) and then runs would be a program: no ``exec``, ``eval`` or ``compile``
in skycore/ may take ``__doc__``.

Not programs by this rule: a node program's arguments as one quoted assignment a line
(``skycore.node.assignment``) and the mount program's data line ``MODULES = {...}`` (a
literal of its modules' sources): data beside a program's file, not code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "skycore"
LIMIT = 40

SHELL = re.compile(
    r"set -[a-z]|&&|\|\||; then\b|\$\(|<<-?\s*'?[A-Za-z_]|2>&1|>\s*/dev/null"
    r"| \| ?[a-z][\w.-]*(?:\s|$)|;\s*(?:fi|done|esac)\b|\n\s*(?:fi|done|esac)\s*(?:;|\n|$)"
    r"|^\s*(?:cd|echo|printf|export|unset|exec|eval|mkdir|rm|mv|cp|cat|chmod|chown|ln|tar"
    r"|umask|trap|sleep|kill|python3?|bash|sh|rclone|sudo|apt-get|pip3?|curl|wget) \S",
    re.M,
)
PYTHON = re.compile(
    r"^\s*(?:import [A-Za-z_]|from [\w.]+ import |def \w+\(|class \w+[(:]|if __name__)", re.M
)
RUNS = {"exec", "eval", "compile"}
COMMANDS = {"system", "run", "run_output", "check_output", "check_call", "call", "Popen"}
COMMANDS |= {"exec_run"}
PROSE_CALLS = {"print", "warn", "debug", "info", "warning", "error", "exception", "critical"}
PROSE_CALLS |= {"log", "ArgumentParser", "add_argument", "add_parser"}
PATTERN_CALLS = {"compile", "match", "fullmatch", "search", "sub", "subn", "split", "findall"}
PATTERN_CALLS |= {"finditer"}
HOLE = "\x00"


@dataclass(frozen=True)
class Found:
    """One string expression that is a program: where, how many lines, and why."""

    path: str
    line: int
    lines: int
    why: str


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _text(node: ast.expr) -> str | None:
    """The text of a string expression (holes for what is not literal); None for any
    other expression."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        value = node.value
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if isinstance(node, ast.JoinedStr):
        parts = [_text(v) if isinstance(v, ast.Constant) else HOLE for v in node.values]
        return "".join(p or "" for p in parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        left, right = _text(node.left), _text(node.right)
        if left is None and right is None:
            return None
        if isinstance(node.op, ast.Mod):
            return left if left is not None else None
        return (left if left is not None else HOLE) + (right if right is not None else HOLE)
    if isinstance(node, ast.Call) and _name(node.func) == "join" and node.args:
        sep = _text(node.func.value) if isinstance(node.func, ast.Attribute) else None
        items = node.args[0]
        if sep is None:
            return None
        if isinstance(items, ast.List | ast.Tuple):
            texts = [_text(e) for e in items.elts]
            return sep.join(t if t is not None else HOLE for t in texts)
        if isinstance(items, ast.GeneratorExp | ast.ListComp):
            elt = _text(items.elt)
            return sep.join([elt if elt is not None else HOLE] * 2)
        return sep.join([HOLE, HOLE])
    return None


def _line_count(node: ast.expr, text: str) -> int:
    source = (node.end_lineno or node.lineno) - node.lineno + 1
    return max(source, len(text.rstrip("\n").split("\n")))


class _Counter(ast.NodeVisitor):
    """Finds the string expressions of one module that are programs."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Found] = []
        self.docs_run: list[int] = []

    def visit_Raise(self, node: ast.Raise) -> None:
        return  # prose: an error's message

    def visit_Assert(self, node: ast.Assert) -> None:
        self.visit(node.test)  # its message is prose

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant | ast.JoinedStr):
            return  # a string statement (a docstring): it runs nothing
        self.visit(node.value)

    def visit_Call(self, node: ast.Call) -> None:
        name = _name(node.func)
        module = node.func.value if isinstance(node.func, ast.Attribute) else None
        if name in PROSE_CALLS or name.endswith(("Error", "Exception", "Warning")):
            return
        if name in PATTERN_CALLS and isinstance(module, ast.Name) and module.id == "re":
            return
        if name in RUNS and any("__doc__" in ast.unparse(a) for a in node.args):
            self.docs_run.append(node.lineno)
        if self._string(node, ""):
            return  # a join of strings
        runs_first = name in RUNS or name == "system" or (name in COMMANDS and module is not None)
        shell = any(
            k.arg == "shell" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in node.keywords
        )
        for i, arg in enumerate(node.args):
            if not (((runs_first and i == 0) or shell) and self._string(arg, f"run by {name}()")):
                self.visit(arg)
        for keyword in node.keywords:
            self.visit(keyword.value)
        self.visit(node.func)

    def visit_List(self, node: ast.List) -> None:
        self._sequence(node.elts)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self._sequence(node.elts)

    def _sequence(self, elts: list[ast.expr]) -> None:
        after_c = False
        for elt in elts:
            if not (after_c and self._string(elt, "run after -c")):
                self.visit(elt)
            after_c = isinstance(elt, ast.Constant) and elt.value == "-c"

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.expr) and self._string(node, ""):
            return
        super().generic_visit(node)

    def _string(self, node: ast.expr, run_by: str) -> bool:
        """Count ``node`` if it is a string expression that is a program; False when it is
        no string expression."""
        text = _text(node)
        if text is None:
            return False
        why = run_by
        if not why and SHELL.search(text):
            why = "shell syntax"
        elif not why and PYTHON.search(text):
            why = "Python source"
        if why:
            self.found.append(Found(self.path, node.lineno, _line_count(node, text), why))
        return True


def programs_in_strings(source: str, path: str = "<sample>") -> tuple[list[Found], list[int]]:
    """(the string expressions of ``source`` that are programs, the lines where ``exec``,
    ``eval`` or ``compile`` take a ``__doc__``)."""
    counter = _Counter(path)
    counter.visit(ast.parse(source))
    return counter.found, counter.docs_run


def count_tree(root: Path = ROOT) -> list[Found]:
    found: list[Found] = []
    for path in sorted(root.rglob("*.py")):
        rel = str(path.relative_to(root.parent))
        programs, docs_run = programs_in_strings(path.read_text(encoding="utf-8"), rel)
        assert not docs_run, f"{rel}:{docs_run}: a docstring is run as a program"
        found += programs
    return found


SAMPLE = '''
"""Module docstring: run `set -e; a && b` then import os."""
import re
import subprocess

BASH = """set -euo pipefail
if [ -f x ]; then
  echo yes
fi
"""
PY = "import sys\\nprint(sys.argv)\\n"
LINES = "\\n".join(["cd /tmp", "mkdir -p build", "echo ok"])


def f(runner, d, cmds):
    """Function docstring: $(not run) && never || counted."""
    runner.run(f"rclone mount {d} /mnt")
    subprocess.run(["bash", "-c", "echo " + d])
    exec(compile("x = 1", "<x>", "exec"))
    joined = " && ".join(cmds)
    message = "done"
    if not d:
        raise ValueError(f"run `mkdir {d} && cd {d}` first; then retry")
    print("use a | grep to filter && sort")
    assert d, "set -e is required"
    return re.compile(r"(a|b) && $(c)"), joined, message


SETTING = 5
"""Attribute docstring: python3 -c 'import os' | sort."""
'''


def test_the_counter_catches_programs_and_ignores_prose() -> None:
    found, docs_run = programs_in_strings(SAMPLE)
    assert not docs_run
    by_line = {f.line: (f.lines, f.why) for f in found}
    assert by_line == {
        6: (5, "shell syntax"),  # a multi-line bash string
        11: (2, "Python source"),  # a Python source string
        12: (3, "shell syntax"),  # a "\\n".join of command lines
        17: (1, "run by run()"),  # an f-string command
        18: (1, "run after -c"),
        19: (1, "run by compile()"),
        20: (1, "shell syntax"),  # a join with " && "
    }
    assert by_line[12][0] == 3  # a "\n".join of command lines counts its lines


def test_a_docstring_that_is_run_is_caught() -> None:
    _, docs_run = programs_in_strings('def f():\n    """echo hi"""\n\nexec(f.__doc__)\n')
    assert docs_run == [4]


def test_skycore_holds_few_lines_of_programs_in_strings() -> None:
    found = count_tree()
    total = sum(f.lines for f in found)
    listing = "\n".join(f"  {f.path}:{f.line} {f.lines} line(s), {f.why}" for f in found)
    assert total <= LIMIT, f"{total} lines of programs in strings (at most {LIMIT}):\n{listing}"
