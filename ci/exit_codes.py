"""The exit codes of every `python -m ci` command, defined once.

0 clean; 1 a regression, a failed correctness gate or a benchmark that crashed on head; 2 an error
(bad arguments, a malformed or truncated input file, a database problem, an interrupt).
"""

EXIT_OK = 0
EXIT_REGRESSION = 1
EXIT_ERROR = 2
