"""Deprecated path: the node image recipe is harness.cloud.nodes (the rclone locator is in
harness.plugin_api); each old name still resolves, with a warning."""

from typing import Any

from skycore.deprecation import moved

DEPRECATED = {
    "rclone_binary": "harness.plugin_api",
    "RECIPE_VERSION": "harness.cloud.nodes",
    "SUITE": "harness.cloud.nodes",
    "PACKAGES": "harness.cloud.nodes",
    "REPOSITORY": "harness.cloud.nodes",
    "NODE_RCLONE": "harness.cloud.nodes",
    "recipe_hash": "harness.cloud.nodes",
    "image_tag": "harness.cloud.nodes",
    "debian_mirror": "harness.cloud.nodes",
    "ensure_node_image": "harness.cloud.nodes",
    "build_rootfs": "harness.cloud.nodes",
    "user_image_tag": "harness.cloud.nodes",
    "ensure_user_image": "harness.cloud.nodes",
}
"""The names this old path still resolves: name -> the module to import it from now."""


def __getattr__(name: str) -> Any:
    return moved(__name__, DEPRECATED, name)
