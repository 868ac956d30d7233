"""Mutation runner for the upload-order smoke test.

Breaks one guarded mechanism at a time in a COPY of the repository and runs
``harness/conformance/test_upload_order.py -k follows_creation`` from that copy N times
(default 3), recording pass/fail and which assertion fired. A mutation is *killed* only if
every run fails in the test body (a pytest ``<failure>``, not a setup ``<error>``); the
unmutated baseline must pass every run, or the figures prove nothing.

    .venv/bin/python tools/run_order_mutations.py              # baseline + all
    .venv/bin/python tools/run_order_mutations.py --source worktree -m a-serialize-removed

``--source head`` (default) copies the committed tree (``git archive HEAD``); ``worktree``
copies the tracked and untracked-but-not-ignored files as they are on disk now. The copy is
imported through ``PYTHONPATH=<copy>`` with ``cwd=<copy>`` (checked before any run: skycore
and the tests must load from the copy, and each mutation must be visible in the imported
code). The repository is never written. Every pattern must match exactly as often as declared,
or the runner stops with exit 2 before running anything: a mutation that silently applies
nowhere would "survive" or "die" for the wrong reason.

The test harness (harness/, the local cloud's code) is NOT copied: it is imported from the
repository, as every other test run does. A copy of it would run the shared gate from a temp
folder that is deleted afterwards whenever the gate restarts itself for a code change (its
version is a hash of the gate's modules, which others edit while this runs).

Exit status: 0 if the baseline passed every run and every mutation was killed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MOUNTING = "skycore/storage/mounting.py"
VFS_OPTIONS = "skycore/storage/vfs_options.py"  # MountOptions
MOUNT_PROGRAM = "skycore/node/mountd/mount.py"  # the node's mount step (serialisation)
STORAGE = "skycore/storage/storage.py"
ORDER_RULE = "skycore/node/mountd/order.py"  # the node's order keeper's rule
ORDER_MODULE = "harness.conformance.test_upload_order"  # run from the repository's harness


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` by ``new`` in ``path``; ``old`` must occur exactly ``count`` times."""

    path: str
    old: str
    new: str
    count: int = 1


@dataclass(frozen=True)
class Mutation:
    name: str
    description: str
    edits: tuple[Edit, ...]
    # Python run in the copy (after the edits) that exits non-zero unless the mutation is in
    # the code that gets imported.
    probe: str
    required: bool = True  # False: informative only, not part of the kill criterion


MOUNT_SCRIPT = (
    "from skycore.storage.common import StorageMode\n"
    "from skycore.storage.mounting import mount_command, MountOptions\n"
    "script = mount_command('s3:b', '/ckpt', StorageMode.MOUNT_CACHED)\n"
)

# How a task's MOUNT_CACHED entry without transfers resolves (the path the smoke test takes).
STORAGE_PROBE = (
    "from skycore.storage.storage import Storage\n"
    "st = Storage.from_spec(name=None, source='s3://some-bucket', store=None, "
    "mode='MOUNT_CACHED')\n"
)

MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        name="a-serialize-removed",
        description="the max_background serialisation step removed entirely: no error, no "
        "warning (the silent regression)",
        edits=(
            Edit(
                MOUNTING,
                "    if mode is not StorageMode.MOUNT_CACHED or options.transfers != 1 "
                'or options.read_only:\n        return ""\n',
                '    return ""  # MUTATION a\n',
            ),
        ),
        probe=MOUNT_SCRIPT + "assert 'max_background' not in script, script\n",
    ),
    Mutation(
        name="b-transfers-4",
        description="--transfers of ordered mounts 1 -> 4 where a task's MOUNT_CACHED entry "
        "gets its default (storage.py; the serialisation step, keyed on transfers == 1, goes "
        "with it)",
        edits=(
            Edit(
                STORAGE,
                "MountOptions(transfers=transfers or 1)",
                "MountOptions(transfers=transfers or 4)",
            ),
        ),
        probe=STORAGE_PROBE + "assert st.mount_options.transfers == 4, st.mount_options\n",
    ),
    Mutation(
        name="b2-transfers-4-serialized",
        description="--transfers 1 -> 4 as in b, but releases still serialised "
        "(max_background 1 on the node): only the order check itself can see this one",
        edits=(
            Edit(
                STORAGE,
                "MountOptions(transfers=transfers or 1)",
                "MountOptions(transfers=transfers or 4)",
            ),
            Edit(
                MOUNTING,
                "    if mode is not StorageMode.MOUNT_CACHED or options.transfers != 1 "
                "or options.read_only:\n",
                "    if mode is not StorageMode.MOUNT_CACHED or options.read_only:  # MUTATION\n",
            ),
        ),
        probe=STORAGE_PROBE
        + "assert st.mount_options.transfers == 4, st.mount_options\n"
        + "from skycore.storage.mounting import _serialize_releases\n"
        + "assert 'max_background' in _serialize_releases(st.mode, st.mount_options)\n",
    ),
    Mutation(
        name="b0-mountoptions-default-4",
        description="(informative) the MountOptions default in vfs_options.py 1 -> 4 alone: an "
        "equivalent mutant for task mounts, since storage.py passes transfers=1 explicitly",
        edits=(
            Edit(
                VFS_OPTIONS, "    transfers: int = 1\n", "    transfers: int = 4  # MUTATION b0\n"
            ),
        ),
        probe=MOUNT_SCRIPT + "assert MountOptions().transfers == 4\n",
        required=False,
    ),
    Mutation(
        name="c-serialize-noop",
        description="the serialisation step kept but made a no-op that still exits 0 (writes "
        "to /dev/null, read-back check always true)",
        edits=(
            Edit(
                MOUNT_PROGRAM,
                'with open(f"{conn}/{setting}", "w") as f:',
                'with open(os.devnull, "w") as f:',
            ),
            Edit(MOUNT_PROGRAM, 'ok = f.read().strip() == "1"', "ok = True"),
        ),
        probe="from skycore import node\n"
        "assert 'open(os.devnull' in node.mountd_program() and 'ok = True' in "
        "node.mountd_program()\n",
    ),
    Mutation(
        name="k-keeper-hold-disabled",
        description="the order keeper releases the next upload while an older released one "
        "is failing (no hold): the corrupt fault's delete-and-retry lets newer files go first",
        edits=(
            Edit(
                ORDER_RULE,
                "    if blocking or paused:\n",
                "    if paused:  # MUTATION k\n",
            ),
        ),
        probe="from skycore import node\nassert 'MUTATION k' in node.mountd_program()\n",
    ),
)

BASELINE = Mutation(
    name="baseline",
    description="no mutation: the test must pass every run",
    edits=(),
    probe=MOUNT_SCRIPT + "assert 'max_background' in script and MountOptions().transfers == 1\n",
)


@dataclass
class Run:
    index: int
    outcome: str  # passed | failed | error | other
    reason: str
    seconds: float


@dataclass
class Result:
    mutation: str
    description: str
    required: bool
    runs: list[Run] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(r.outcome == "failed" for r in self.runs)

    @property
    def passed(self) -> int:
        return sum(r.outcome == "passed" for r in self.runs)


# --- the copy ---------------------------------------------------------------------------------


def copy_repo(source: str, dest: Path) -> str:
    """Copy the repository into ``dest``; returns a description of what was copied."""
    if source == "head":
        sha = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            check=True,
            text=True,
            capture_output=True,
        ).stdout.strip()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", "--format=tar", sha],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        shutil.rmtree(dest / "harness")
        return f"HEAD {sha[:12]}"
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"],
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for raw in listed:
        if not raw or raw.startswith(b"harness/"):
            continue
        rel = raw.decode()
        src = REPO / rel
        if not src.is_file():  # deleted in the work tree
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    status = subprocess.run(
        ["git", "-C", str(REPO), "status", "--short"], check=True, text=True, capture_output=True
    ).stdout.split("\n")
    dirty = [line for line in status if line.strip()]
    return f"work tree of {REPO} ({len(dirty)} changed/untracked paths)"


class MutationError(Exception):
    """A mutation could not be applied as declared (pattern missing or ambiguous)."""


def apply(mutation: Mutation, root: Path) -> None:
    """Apply every edit of ``mutation`` under ``root``; MutationError if a pattern does not
    occur exactly as often as declared (checked for all edits before anything is written)."""
    texts: dict[str, str] = {}
    for edit in mutation.edits:
        text = texts.get(edit.path)
        if text is None:
            text = (root / edit.path).read_text()
        found = text.count(edit.old)
        if found != edit.count:
            raise MutationError(
                f"mutation {mutation.name}: expected {edit.count} occurrence(s) of "
                f"{edit.old!r} in {edit.path}, found {found}. The file changed: update the "
                f"pattern in {Path(__file__).name}."
            )
        texts[edit.path] = text.replace(edit.old, edit.new)
    for path, text in texts.items():
        (root / path).write_text(text)


def child_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root)
    env.pop("PYTEST_ADDOPTS", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def probe(mutation: Mutation, root: Path) -> str:
    """Check that skycore imports from the copy (harness from the repository) and that the
    mutation (or its absence) is what gets imported. Returns skycore.__file__."""
    code = (
        "import sys, skycore, harness\n"
        f"assert skycore.__file__.startswith({str(root) + '/'!r}), skycore.__file__\n"
        f"assert harness.__file__.startswith({str(REPO) + '/'!r}), harness.__file__\n"
        "print(skycore.__file__)\n" + mutation.probe
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=child_env(root), text=True, capture_output=True
    )
    if out.returncode != 0:
        raise MutationError(
            f"mutation {mutation.name}: the copy does not import as expected:\n{out.stderr}"
        )
    return out.stdout.strip().splitlines()[0]


def gate_notice(store: str, root: Path) -> None:
    """Say so if the running gate's code is older than the repository's: the first run will
    restart it (as any test run from the repository would), emptying its event log."""
    code = (
        "import json\n"
        "from harness.emulators.fleet import emulator_class\n"
        "from harness.emulators.launcher import gate_version\n"
        "from harness.emulators.records import state_file\n"
        "from harness.paths import harness_home\n"
        f"rec = json.loads(state_file(harness_home(), {store!r}).read_text())\n"
        f"print(rec['gate_version'], gate_version(emulator_class({store!r})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=child_env(root), text=True, capture_output=True
    )
    words = out.stdout.split()
    if out.returncode != 0 or len(words) != 2:
        raise MutationError(f"cannot read the running {store} gate's version:\n{out.stderr}")
    if words[0] != words[1]:
        print(
            f"note: the running {store} gate ({words[0]}) predates the repository's gate code "
            f"({words[1]}); the first run restarts it",
            flush=True,
        )


# --- running ------------------------------------------------------------------------------------


def classify(junit: Path) -> tuple[str, str]:
    """(outcome, reason) of the single selected test from pytest's junit XML."""
    try:
        cases = list(ET.parse(junit).getroot().iter("testcase"))
    except (OSError, ET.ParseError) as e:
        return "other", f"no junit report ({e})"
    if len(cases) != 1:
        return "other", f"{len(cases)} test cases selected, expected 1"
    case = cases[0]
    for tag in ("failure", "error"):
        node = case.find(tag)
        if node is not None:
            message = (node.get("message") or "").strip().splitlines()
            first = message[0] if message else tag
            if "OrderLost" in first or "upload order differs" in first:
                reason = "order check: " + first[:160]
            elif "serialized releases" in first:
                reason = "node check (max_background): " + first[:160]
            else:
                reason = first[:200]
            return ("failed" if tag == "failure" else "error"), reason
    if case.find("skipped") is not None:
        return "other", "skipped: " + (case.find("skipped").get("message") or "")  # type: ignore[union-attr]
    return "passed", ""


def run_once(root: Path, store: str, index: int, logs: Path, name: str) -> Run:
    junit = logs / f"{name}-{index}.xml"
    argv = [
        sys.executable, "-m", "pytest", "--pyargs", ORDER_MODULE, "--store", store,
        "-k", "follows_creation",
        "-p", "no:cacheprovider", "-q", f"--junitxml={junit}",
    ]  # fmt: skip
    t0 = time.monotonic()
    with open(logs / f"{name}-{index}.log", "w") as log:
        proc = subprocess.run(argv, cwd=root, env=child_env(root), stdout=log, stderr=log)
    seconds = time.monotonic() - t0
    outcome, reason = classify(junit)
    if outcome == "passed" and proc.returncode != 0:
        outcome, reason = "other", f"pytest exit {proc.returncode} with a passing report"
    return Run(index, outcome, reason, round(seconds, 1))


def table(results: list[Result], runs: int) -> str:
    head = "| mutation | " + " | ".join(f"run {i + 1}" for i in range(runs)) + " | verdict |"
    lines = [head, "|" + "---|" * (runs + 2)]
    for res in results:
        cells = []
        for r in res.runs:
            why = ""
            if r.outcome == "failed":
                why = " (order)" if r.reason.startswith("order") else ""
                why = " (node)" if r.reason.startswith("node") else why
            cells.append(f"{r.outcome}{why}, {r.seconds:.0f} s")
        if res.mutation == "baseline":
            verdict = f"passes {res.passed}/{len(res.runs)}"
        else:
            verdict = f"killed {res.failed}/{len(res.runs)}"
            verdict += "" if res.required else " (informative)"
        lines.append(f"| {res.mutation} | " + " | ".join(cells) + f" | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    names = [m.name for m in MUTATIONS]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", choices=["head", "worktree"], default="head")
    parser.add_argument("--store", default="s3")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("-m", "--mutation", action="append", choices=names, help="default: all")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", type=Path, help="write the results here too")
    parser.add_argument("--keep", action="store_true", help="keep the copies and logs")
    args = parser.parse_args(argv)

    chosen = [m for m in MUTATIONS if not args.mutation or m.name in args.mutation]
    if not args.no_baseline:
        chosen.insert(0, BASELINE)
    work = Path(tempfile.mkdtemp(prefix="skycore-mutation-"))
    logs = work / "logs"
    logs.mkdir()
    results: list[Result] = []
    try:
        # Prepare (and validate) every copy before the first (slow) run.
        copies: dict[str, Path] = {}
        what = ""
        for mutation in chosen:
            root = work / mutation.name
            root.mkdir()
            what = copy_repo(args.source, root)
            apply(mutation, root)
            imported = probe(mutation, root)
            print(f"{mutation.name}: copy of {what}, skycore imported from {imported}", flush=True)
            copies[mutation.name] = root
        gate_notice(args.store, next(iter(copies.values())))
        for mutation in chosen:
            res = Result(mutation.name, mutation.description, mutation.required)
            for i in range(args.runs):
                run = run_once(copies[mutation.name], args.store, i + 1, logs, mutation.name)
                print(f"  {mutation.name} run {i + 1}: {run.outcome} {run.reason}", flush=True)
                res.runs.append(run)
            results.append(res)
    except MutationError as e:
        print(f"run_order_mutations: {e}", file=sys.stderr)
        return 2
    finally:
        if args.keep:
            print(f"copies and logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\nsource: {what}; store {args.store}; {args.runs} runs each\n")
    print(table(results, args.runs))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"source": what, "store": args.store, "results": [asdict(r) for r in results]}
        args.json.write_text(json.dumps(payload, indent=1) + "\n")
    ok = all(
        (r.passed == len(r.runs)) if r.mutation == "baseline" else (r.failed == len(r.runs))
        for r in results
        if r.required
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
