"""`python -m ci`: see ci/cli.py."""

import sys

try:
    from ci.cli import main

    code = main()
except KeyboardInterrupt:  # before a command started (imports, arguments): nothing was written
    print("error: interrupted before the command started; nothing was written", file=sys.stderr)
    code = 2
raise SystemExit(code)
