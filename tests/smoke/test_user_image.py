"""The seed's 'sky launch comp_test.yaml --image-id docker:continuumio/miniconda3', on the
local cloud: PROVISION brings skycore's runtime into a node whose image lacks it. It checks
the launcher, not a store, so it runs once here rather than in every conformance run; it
reuses the conformance suite's comp test (harness/conformance/test_comp_test.py)."""

from __future__ import annotations

import pytest

from harness.conformance.test_comp_test import check_comp_test, run_buckets, task_for


@pytest.fixture
def user_image(node_engine: tuple[str, str]) -> str:
    """A user image: another Debian release with python3 and rsync but no rclone or fuse3."""
    from harness.cloud import nodes

    return nodes.ensure_user_image(node_engine[0], say=lambda _msg: None)


def test_comp_test_on_a_user_image(
    request: pytest.FixtureRequest, user_image: str, cluster_factory
) -> None:
    """The seed's 'sky launch comp_test.yaml --image-id docker:continuumio/miniconda3':
    PROVISION brings skycore's runtime (rclone, fusermount3) into a node whose image lacks it,
    and the whole comp test passes there."""
    from harness.testing.plugin import selected_stores

    store = selected_stores(request.config)[0]
    spec = task_for(store)
    spec["resources"] = {**spec.get("resources", {}), "image_id": f"docker:{user_image}"}
    buckets = run_buckets(store)
    rid = next(buckets)
    try:
        cluster = cluster_factory("userimg")
        check_comp_test(store, rid, cluster, spec)
        code, out = cluster.shell("cat /etc/os-release; command -v rclone fusermount3")
        assert code == 0 and "trixie" in out, out
        assert "/usr/local/bin/rclone" in out and "/usr/local/bin/fusermount3" in out, out
    finally:
        next(buckets, None)
