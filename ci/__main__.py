"""`python -m ci`: see ci/cli.py."""

from ci.cli import main

raise SystemExit(main())
