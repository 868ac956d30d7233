"""Deprecated path: the node image recipe is harness.cloud.nodes (the rclone locator is in
harness.plugin_api); each old name still resolves, with a warning."""

from skycore.deprecation import forwarder, moved_names

DEPRECATED = moved_names({
    "harness.plugin_api": ("rclone_binary",),
    "harness.cloud.nodes": (
        "RECIPE_VERSION", "SUITE", "PACKAGES", "REPOSITORY", "NODE_RCLONE", "recipe_hash",
        "image_tag", "debian_mirror", "ensure_node_image", "build_rootfs", "user_image_tag",
        "ensure_user_image",
    ),
})  # fmt: skip
"""The names this old path still resolves: name -> the module to import it from now."""
__getattr__ = forwarder(__name__, DEPRECATED)
