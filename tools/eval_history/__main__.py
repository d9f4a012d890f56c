"""`python -m tools.eval_history RESULTS_DIR [RESULTS_DIR ...]` (see `tools.eval_history`)."""

import sys

from tools.eval_history import main

if __name__ == "__main__":
    sys.exit(main())
