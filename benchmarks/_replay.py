"""Samples taken in one `setup_cache` process, handed to asv one per call.

Why: asv runs every (benchmark, parameters) in a process of its own, and on the H200 VM a process
that imports torch and creates a CUDA context costs ~4-5 s before it measures anything (2026-11-29,
docs/performance.md "Suite run time"). A class whose cases are all measured inside its `setup_cache` pays
that once; its per-case `time_*` processes only read the pickled samples (~0.5 s each).

How the samples reach asv unchanged: the class's `timer` is `timing.CLOCK.now`, `number = 1`,
`warmup_time = 0` and `repeat = per_round` (an int), so asv calls the `time_*` function exactly
`per_round` times per process, and each call advances the clock by the next recorded sample. asv's
result file then holds exactly the measured samples (its Mann-Whitney test, the service's
verdicts). With `rounds = R`, `setup_cache` takes `R * per_round` samples per measure:

- `asv run` of one commit computes `setup_cache` once and runs one process per round; each process
  claims the next unused chunk of `per_round` samples through a counter file in its working
  directory, which is asv's setup_cache directory (it holds `cache.pickle`). No sample is handed
  out twice.
- `asv continuous` / `asv run --interleave-rounds` computes `setup_cache` again for every round of
  every commit (a fresh process, a fresh cache), so drift over the job reaches both commits'
  samples, as with one process per case; each round then uses the first chunk of its own cache.

Each `setup_cache` must be defined in its own class body: asv keys the cache on the function's
source line, and an inherited one would be shared between classes.
"""

from __future__ import annotations

import itertools
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from . import model_runs, timing

_CALLS: dict[str, list[int]] = {}  # per process: measure|case -> [claimed chunk, calls so far]


def measure_matrix(params: tuple, make_compute: Callable[[], Callable[..., dict]]) -> dict:
    """`{key: entry}` for every case of `params` (`model_runs.guarded`: values, skip or error).

    Args:
        params: the class's `params` (their product is the cases, e.g. (preset, backend)).
        make_compute: returns `compute(*case)` -> `{measure: [seconds, ...]}`; NotImplementedError
            from it skips the whole matrix (no GPU), from `compute` only that case. A measure may
            instead map to a zero-argument callable returning the samples: it is called after every
            case has been measured (what must come last in the process, e.g. profiling).

    Returns:
        The matrix setup_cache returns.
    """
    t0 = time.perf_counter()
    try:
        compute = make_compute()
    except NotImplementedError as exc:
        return {"_global": {"skip": str(exc)}}
    results: dict = {}
    seconds: dict[str, float] = {}
    cases = list(itertools.product(*params))
    label = _caller_class()
    for i, case in enumerate(cases, start=1):
        key = model_runs.key_of(case)
        model_runs.guarded(results, key, lambda case=case: compute(*case), seconds)
        model_runs.report_case(label, i, len(cases), key, seconds[key])
    later = [(key, entry, deferred) for key, entry in results.items()
             if (deferred := {m: v for m, v in entry.get("values", {}).items() if callable(v)})]
    for i, (key, entry, deferred) in enumerate(later, start=1):
        before = seconds.get(key, 0.0)
        model_runs.guarded(results, key, lambda entry=entry, deferred=deferred: {
            **entry["values"], **{m: take() for m, take in deferred.items()}
        }, seconds)  # fmt: skip
        # The deferred phase was ~293 s without a line on one H100 (2026-12-05): say where it is.
        model_runs.report_case(f"{label}, measured last ({', '.join(deferred)})", i, len(later), key,
                               seconds[key] - before)
    model_runs.report_setup(label, seconds, time.perf_counter() - t0)
    return results


def _caller_class() -> str:
    """The benchmark class whose setup_cache called measure_matrix (its `self`), for the log line."""
    owner = sys._getframe(2).f_locals.get("self")
    return type(owner).__name__ if owner is not None else "measure_matrix"


def case_samples(cache: dict, case: tuple[str, ...]) -> dict:
    """The samples of one case; raises the case's skip (NotImplementedError) or error (RuntimeError)."""
    return model_runs.entry_values(cache, model_runs.key_of(case))


def _claim_chunk(key: str) -> int:
    cwd = Path.cwd()
    if not (cwd / "cache.pickle").is_file():  # not inside asv's setup_cache directory
        return 0
    counter = cwd / (".replay-" + re.sub(r"[^A-Za-z0-9._-]", "_", key))
    try:
        chunk = int(counter.read_text())
    except (FileNotFoundError, ValueError):
        chunk = 0
    counter.write_text(str(chunk + 1))
    return chunk


def replay(samples: dict, measure: str, case: tuple[str, ...], per_round: int) -> None:
    """Advance the measured clock by the next recorded sample of `measure` for `case`.

    Args:
        samples: `case_samples(...)` of the case.
        measure: e.g. "time_gpu".
        case: the parameter tuple (names the counter).
        per_round: samples one process hands out (the class's `repeat`).
    """
    key = measure + "|" + model_runs.key_of(case)
    state = _CALLS.get(key)
    if state is None:
        state = _CALLS[key] = [_claim_chunk(key), 0]
    seq = samples[measure]
    index = state[0] * per_round + state[1]
    if index >= len(seq):
        raise RuntimeError(
            f"{key}: sample {index + 1} asked for, setup_cache took {len(seq)} (rounds x repeat of the class); "
            "an `-a rounds=`/`-a repeat=` override above the class's values would hand out samples twice"
        )
    timing.CLOCK.advance(seq[index])
    state[1] += 1


class Replayed:
    """Base of a class whose samples come from its setup_cache: asv's timing settings and `setup`.

    The subclass sets `params`, `rounds`, `repeat` (an int: samples per round) and defines its
    own `setup_cache` (in its body: see the module docstring) and `time_*` methods that call
    `self.replay(measure, *case)`.
    """

    timer = timing.CLOCK.now
    number = 1  # no calibration calls,
    warmup_time = 0.0  # no warm-up calls (the warm-up happened in setup_cache)
    timeout = 120

    def setup(self, cache: dict, *case: str) -> None:
        self.samples = case_samples(cache, case)

    def replay(self, measure: str, *case: str) -> None:
        replay(self.samples, measure, case, self.repeat)
