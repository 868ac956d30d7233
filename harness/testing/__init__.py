"""The pytest side of the harness: the plugin (options, markers, fixtures), test buckets and
clusters, side-by-side scenarios, and the report of upload timelines and fault scenarios."""
