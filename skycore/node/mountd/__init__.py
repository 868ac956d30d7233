"""skycore's mount program on a node (python3 standard library only), one module per part:

- ``rc``: the rc client of the node's rclone daemons, the mount table, shared constants.
- ``daemon``: start a daemon, mount through it, stop it once idle.
- ``copying``: COPY snapshots through a daemon.
- ``keeper``: upload order (queue lock, upload hold, order keeper, hurry).
- ``refresher``: listings kept for a mount's life, the daemon's refresher.
- ``drain``: the drain rule and unmount.
- ``up``: mount many requests at once (``up-many``), the live probe.
- ``cli``: the command line.

It reaches a node as one text (``skycore.node.mountd_program``): a bootstrap that serves each
module's source under its import name and runs ``cli.main``.
"""
