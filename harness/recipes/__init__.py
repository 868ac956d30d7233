"""Mount recipes harness ships (skycore.storage.recipes plug-ins) and the matrix that runs
the same scenarios on each of them side by side."""
