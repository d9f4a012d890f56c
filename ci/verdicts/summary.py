"""What a set of verdicts adds up to: counts per outcome, and the process exit code they give."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ci.exit_codes import EXIT_OK, EXIT_REGRESSION
from ci.records import Outcome, Verdict


def summarize(verdicts: Iterable[Verdict]) -> dict[Outcome, int]:
    """Count verdicts per outcome.

    Args:
        verdicts: any verdicts (A/B and correctness gates alike).

    Returns:
        {Outcome: count} with every Outcome present (0 when absent), in Outcome order.
    """
    counts: Counter[Outcome] = Counter()
    for v in verdicts:
        if not isinstance(v, Verdict):
            raise TypeError(f"summarize expects Verdict records, got {type(v).__name__}")
        counts[v.outcome] += 1
    return {o: counts.get(o, 0) for o in Outcome}


def exit_code(verdicts: Iterable[Verdict]) -> int:
    """Process exit code for CI: 1 if any series REGRESSED or FAILED (a gate, or a crash on head), else 0.

    Args:
        verdicts: A/B verdicts and/or correctness gate verdicts.

    Returns:
        0 or 1 (the CLI uses 2 for errors).
    """
    counts = summarize(verdicts)
    return EXIT_REGRESSION if counts[Outcome.REGRESSED] or counts[Outcome.FAILED] else EXIT_OK
