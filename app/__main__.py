"""`python -m app` is the `mcp-eventlog` command."""

import sys

from app.cli import main

sys.exit(main())
