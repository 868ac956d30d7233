"""skycore: a small cloud task launcher in the spirit of SkyPilot.

Plug-ins come through two entry-point groups: skycore.stores (a store: skycore/stores.py)
and skycore.mount_recipes (a way to mount buckets on nodes: skycore/storage/recipes.py).
Old import paths resolve through skycore.old_paths.
"""

from skycore import old_paths

old_paths.install()
