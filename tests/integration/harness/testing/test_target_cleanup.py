"""Clean-up of target runs on every store, through the store's own API: a run's buckets are
found by their ``PREFIX-RUNID`` part wherever it sits in the name and deleted, another run's
and unrelated buckets are left, and ``--sweep`` deletes only leftovers older than its age."""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml

from harness.accounts import OTHER, USER
from harness.emulators.base import PublicAccessUnavailable, RunningEmulator
from harness.targets import dump_target, load_target, new_run_id, run_tag
from harness.testing.target_cleanup import delete_run_buckets, sweep


def test_run_buckets_and_sweep(store_emulator: RunningEmulator, tmp_path: Path) -> None:
    emu = store_emulator
    doc = yaml.safe_load(
        dump_target(emu.store, emu.config_section(USER), emu.config_section(OTHER), None)
    )
    doc["bucket_prefix"] = prefix = f"c{uuid.uuid4().hex[:6]}"
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    target = load_target(path)
    attached = type(emu).attach(target)
    run, other_run = new_run_id(), new_run_id()
    mine = [f"{run_tag(prefix, run)}-a", f"{emu.store}-sky-managed-{run_tag(prefix, run)}-b"]
    theirs = f"{run_tag(prefix, other_run)}-c"
    unrelated = f"{prefix}x-{run}-d"  # the prefix without its dash: not a run's bucket
    for name in [*mine, theirs, unrelated]:
        attached.make_bucket(name, objects={"k.txt": b"x"})
    try:  # public where the store's API can make it so (R2's setting cannot be, here)
        attached.check_public_possible()
        public = True
    except PublicAccessUnavailable:
        public = False
    attached.make_bucket(f"{run_tag(prefix, run)}-o", owner=OTHER, public=public)
    mine.append(f"{run_tag(prefix, run)}-o")
    try:
        lines = delete_run_buckets(target, run)
        assert sorted(line.rsplit(" ", 1)[-1] for line in lines) == sorted(mine), lines
        left = {**attached.list_buckets(USER), **attached.list_buckets(OTHER)}
        assert not set(mine) & set(left)
        assert {theirs, unrelated} <= set(left)

        assert sweep(target)[0].startswith(f"no bucket with prefix '{prefix}-' older than 60")
        assert sweep(target, older_than_s=0) == [f"deleted bucket {theirs}"]
        assert unrelated in attached.list_buckets(USER)
    finally:
        for name in [*mine, theirs, unrelated]:
            emu.delete_bucket(name)
