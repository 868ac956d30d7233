"""No option that does nothing: every option of every ``skycore`` and ``harness`` command is
read by its command (or passed on to code that reads it), and the overrides ``exec`` cannot
apply are checked against the cluster it runs on."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from harness.cli import cli as harness_cli
from skycore import core, state
from skycore.cli import cli as skycore_cli
from skycore.config import DockerConfig, SkycoreConfig, save_config
from skycore.errors import ClusterError
from skycore.task import Task

CLICK_HANDLED = {"version"}
"""Options click acts on itself, through their own callbacks: ``--version`` prints and exits
(``--help`` is not among a command's params at all)."""


def commands(group: click.Group, path: str) -> Iterator[tuple[str, click.Command]]:
    """Every command and subcommand of ``group`` with its command line."""
    ctx = click.Context(group)
    yield path, group
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, f"{path} {name}"
        if isinstance(cmd, click.Group):
            yield from commands(cmd, f"{path} {name}")
        else:
            yield f"{path} {name}", cmd


def every_option() -> list[tuple[str, click.Command, click.Option]]:
    found = []
    for root, name in ((skycore_cli, "skycore"), (harness_cli, "harness")):
        for path, cmd in commands(root, name):
            found += [(path, cmd, p) for p in cmd.params if isinstance(p, click.Option)]
    return found


OPTIONS = every_option()


def function_node(fn: Callable[..., Any]) -> ast.FunctionDef:
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef), fn
    return node


def loads(node: ast.AST, name: str) -> bool:
    """``name`` is read in ``node``'s body (a Name load; decorators and defaults aside)."""
    body = node.body if isinstance(node, ast.FunctionDef) else [node]
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        for stmt in body
        for n in ast.walk(stmt)
    )


def reads_key(fn: Callable[..., Any], node: ast.FunctionDef, kwargs: str, key: str) -> bool:
    """``kwargs`` (a ``**kwargs`` dict) is passed to a function whose code names ``key``."""
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        passed = [*call.args, *(k.value for k in call.keywords)]
        if not any(isinstance(a, ast.Name) and a.id == kwargs for a in passed):
            continue
        callee = fn.__globals__.get(call.func.id) if isinstance(call.func, ast.Name) else None
        if callee is None or not callable(callee):
            continue
        tree = function_node(inspect.unwrap(callee))
        if any(isinstance(n, ast.Constant) and n.value == key for n in ast.walk(tree)):
            return True
    return False


def test_every_command_was_found() -> None:
    paths = {path for root, n in ((skycore_cli, "skycore"), (harness_cli, "harness"))
             for path, _ in commands(root, n)}  # fmt: skip
    for path in ("skycore exec", "skycore jobs launch", "skycore check", "harness conform"):
        assert path in paths, paths
    assert len(OPTIONS) > 50


@pytest.mark.parametrize(
    "path,cmd,option", OPTIONS, ids=[f"{p}:{o.opts[-1]}" for p, _, o in OPTIONS]
)
def test_every_option_is_read_by_its_command(
    path: str, cmd: click.Command, option: click.Option
) -> None:
    if option.name in CLICK_HANDLED:
        assert not option.expose_value and option.callback is not None
        return
    assert option.expose_value, f"{path} {option.opts}: the command never receives it"
    assert cmd.callback is not None, path
    fn = inspect.unwrap(cmd.callback)
    node = function_node(fn)
    name = option.name
    assert name is not None
    declared = [a.arg for a in (*node.args.args, *node.args.kwonlyargs)]
    if name in declared:
        assert loads(node, name), f"{path}: {'/'.join(option.opts)} is never read"
        return
    kwargs = node.args.kwarg
    assert kwargs is not None, f"{path}: {'/'.join(option.opts)} has no parameter"
    assert reads_key(fn, node, kwargs.arg, name), (
        f"{path}: {'/'.join(option.opts)} lands in **{kwargs.arg}, which no code reads it from"
    )


# --- exec: the overrides it cannot apply are checked against the cluster -------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("SKYCORE_HOME", str(h))
    monkeypatch.chdir(tmp_path)
    # An engine no one listens on: exec must refuse before it asks for the nodes.
    save_config(
        SkycoreConfig(
            docker=DockerConfig(host=f"unix://{tmp_path}/no-engine.sock"),
            logs_dir=str(tmp_path / "sky_logs"),
        )
    )
    return h


def up_cluster(name: str, **resources: Any) -> state.ClusterRecord:
    res = {"cloud": "aws", "image_id": None, "use_spot": False, "num_nodes": 2, **resources}
    state.upsert_cluster(name, state.CLUSTER_INIT, "docker", 2, res, "launch: new cluster")
    state.set_cluster_status(name, state.CLUSTER_UP, "by a test")
    record = state.get_cluster(name)
    assert record is not None
    return record


MISMATCHES = [
    (("--num-nodes", "3"), {}, "num_nodes=2"),
    (("--cloud", "gcp"), {}, "cloud=aws"),
    (("--use-spot",), {}, "use_spot=False"),
    (("--no-use-spot",), {"use_spot": True}, "use_spot=True"),
    (("--image-id", "docker:other"), {}, "image_id=None"),
]


@pytest.mark.parametrize("flags,launched,theirs", MISMATCHES, ids=[m[0][0] for m in MISMATCHES])
def test_exec_refuses_an_override_its_cluster_was_not_launched_with(
    home: Path, flags: tuple[str, ...], launched: dict[str, Any], theirs: str
) -> None:
    up_cluster("c1", **launched)
    result = CliRunner().invoke(skycore_cli, ["exec", "c1", *flags, "echo hi"])
    assert result.exit_code == 2, result.output
    out = " ".join(result.output.split())
    assert f"{flags[0]}: the task asks for" in out, out  # the option
    assert theirs in out and "cluster 'c1'" in out, out  # the cluster's value
    assert "launch a new cluster with -c" in out, out  # the fix
    assert "Traceback" not in out


def test_exec_fit_names_the_yaml_field_and_accepts_what_fits(home: Path) -> None:
    record = up_cluster("c2", use_spot=True, image_id="docker:img")
    fits = Task.from_dict(
        {"num_nodes": 1, "resources": {"cloud": "aws", "use_spot": True, "image_id": "docker:img"}}
    )
    core.check_exec_fits(record, fits)
    core.check_exec_fits(record, Task.from_dict({"run": "x"}))  # asks for nothing
    other = Task.from_dict({"resources": {"cloud": "gcp"}, "run": "x"})
    with pytest.raises(ClusterError, match=r"resources\.cloud: the task asks for cloud=gcp"):
        core.check_exec_fits(record, other)
    with pytest.raises(ClusterError, match=r"--num-nodes: .*; --cloud: .*drop --num-nodes and"):
        core.check_exec_fits(
            record,
            Task.from_dict({"num_nodes": 5, "resources": {"cloud": "gcp"}, "run": "x"}),
            {"cloud": "--cloud", "num_nodes": "--num-nodes"},
        )
