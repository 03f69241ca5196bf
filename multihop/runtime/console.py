"""The console every command prints to, the shared command line's and each method's own (a method's sub-app lies in
the programs layer, so the console lies below it): full width in a terminal, 150 columns in a log, so a log keeps the
whole table."""

import sys

from rich.console import Console

console = Console() if sys.stdout.isatty() else Console(width=150)
