"""The local cloud's machinery: the private dockerd, the node images, system packages, the
harness's background processes, chaos (``preemption``, ``stalls``, ``store_faults``) and ``cloud``,
which brings all of it up and down as one thing."""
