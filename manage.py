#!/usr/bin/env python
"""Django's command-line utility for GPU-hour budget governance."""

import os
import sys


def main() -> None:
    """Run a management command with the project's settings."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
