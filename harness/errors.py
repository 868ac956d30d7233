"""The one error type the local cloud raises: a single paragraph naming cause and fix."""


class CloudError(Exception):
    """Bringing the local cloud up (or down) failed; the message names the cause and the fix."""
