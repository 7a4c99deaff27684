"""The ``polyfuse`` command (stub, replaced below)."""


def main(argv=None) -> int:
    return 0
