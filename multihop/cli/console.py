"""The console every command prints to."""

import sys

from rich.console import Console

console = Console() if sys.stdout.isatty() else Console(width=150)  # logs keep the whole table
