"""What `tools.bench_e2e` times, in which order, within which time box (pure: no CUDA needed)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# Modes: eager; graph = the eager forward captured once as a CUDA graph; compile+graph = torch.compile
# (fullgraph, at the captured capacities), then captured the same way.
MODES = ("eager", "graph", "compile+graph")
# Backends whose pruned forward can be captured (pruners.CAPTURABLE_BACKENDS without the test backend).
GRAPH_BACKENDS = ("triton", "fa2_varlen", "padded_sdpa")


@dataclass(frozen=True)
class Config:
    """One timed configuration. `pruner` is None for the dense model (it does not depend on one)."""

    model: str
    pruner: str | None
    batch: int
    backend: str
    mode: str = "eager"
    exact: bool = False  # eager exact_capacity
    rlinear: bool = False  # build_pruned_model(ragged_linear=True): linear layers over the kept rows only
    reread: bool = False  # the dense model's second reading, after the pruned configurations of its batch
    fused: bool = False  # build_pruned_model(fused_blocks=True): five launches a block (pruners.fused)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")

    @property
    def mode_label(self) -> str:
        return (self.mode + ("+exact" if self.exact else "") + ("+rlin" if self.rlinear else "")
                + ("+fused" if self.fused else "") + ("+again" if self.reread else ""))

    @property
    def captured(self) -> bool:
        return self.mode != "eager"

    def __str__(self) -> str:
        return f"{self.model} {self.pruner or '-'} B={self.batch} {self.backend}/{self.mode_label}"


def grid_configs(
    models: Iterable[str],
    pruners: Sequence[str],
    batches: Iterable[int],
    backends: Sequence[str],
    *,
    ragged: Callable[[str], bool] = lambda name: False,
    eager: bool = False,
    compile_batches: Iterable[int] = (1, 4),
    compile_dense: bool = True,
    exact_capacity: bool = False,
    ragged_linear: bool = False,
    fused: bool = False,
) -> list[Config]:
    """Configurations, model by model and batch by batch, so each (model, batch) completes its set
    (dense, then every pruner) before the next one starts: a time box cuts whole points.

    Per (model, batch): `dense` eager, graph and (with `compile_dense`) compile+graph; per pruner, each
    capturable backend in graph mode, `triton` also compile+graph at `compile_batches`, eager rows for
    every backend with `eager` (`nested_sdpa`, which cannot be captured, is eager only); then dense eager
    and graph again (the first configurations of a process have read up to ~15% slow on the H200,
    2026-11-29; the faster reading counts, which is the conservative choice for pruned/dense ratios).

    Args:
        ragged: pruner name -> whether it keeps ragged counts (exact_capacity and ragged_linear rows).
        exact_capacity: add an eager exact_capacity row per ragged pruner and pruned backend.
        ragged_linear: add a triton graph row with `ragged_linear=True` per ragged pruner.
        fused: add graph rows with `fused_blocks=True`: dense, and per pruner every capturable backend (so
            fused rows compare graph against graph too), and compile+graph rows fused where the unfused ones
            run; dense fused is a dense configuration like the others.
    """
    compile_at = set(compile_batches)
    out: list[Config] = []
    for model in models:
        for batch in batches:
            if "dense" in backends:
                out += [Config(model, None, batch, "dense"), Config(model, None, batch, "dense", "graph")]
                if compile_dense:
                    out.append(Config(model, None, batch, "dense", "compile+graph"))
                if fused:
                    out.append(Config(model, None, batch, "dense", "graph", fused=True))
                    if compile_dense:
                        out.append(Config(model, None, batch, "dense", "compile+graph", fused=True))
            for pruner in pruners:
                for backend in backends:
                    if backend == "dense":
                        continue
                    if backend in GRAPH_BACKENDS:
                        out.append(Config(model, pruner, batch, backend, "graph"))
                        if fused:
                            out.append(Config(model, pruner, batch, backend, "graph", fused=True))
                    if backend == "triton" and batch in compile_at:
                        out.append(Config(model, pruner, batch, backend, "compile+graph"))
                        if fused:
                            out.append(Config(model, pruner, batch, backend, "compile+graph", fused=True))
                    if eager or backend not in GRAPH_BACKENDS:
                        out.append(Config(model, pruner, batch, backend))
                    if exact_capacity and ragged(pruner):
                        out.append(Config(model, pruner, batch, backend, "eager", exact=True))
                    if ragged_linear and backend == "triton" and ragged(pruner):
                        out.append(Config(model, pruner, batch, backend, "graph", rlinear=True))
            if "dense" in backends:
                out += [Config(model, None, batch, "dense", reread=True),
                        Config(model, None, batch, "dense", "graph", reread=True)]
    return out


@dataclass
class PlanResult:
    rows: list[dict]
    failed: list[tuple[Config, str]]
    skipped: list[Config]  # not started: the time box ran out


def run_plan(
    configs: Sequence[Config],
    measure: Callable[[Config], dict],
    time_box: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    start: float | None = None,
    on_row: Callable[[dict], None] | None = None,
    on_error: Callable[[Config, str], None] | None = None,
) -> PlanResult:
    """Run `measure` on each configuration in order; start none once `time_box` seconds have passed.

    A configuration already running when the box ends finishes (the box bounds starts, not ends).
    RuntimeError/NotImplementedError/ValueError (out of memory, a missing baseline, a backend that
    cannot be captured) fail that configuration only.

    Args:
        configs: the plan.
        measure: Config -> result row.
        time_box: seconds from `start` after which no configuration starts; None = no limit.
        clock: seconds (monotonic).
        start: the clock value the box counts from (default: now).
        on_row, on_error: progress callbacks.

    Returns:
        rows (each with config_s and elapsed_s added), failures, configurations never started.
    """
    start = clock() if start is None else start
    res = PlanResult([], [], [])
    for i, cfg in enumerate(configs):
        if time_box is not None and clock() - start >= time_box:
            res.skipped = list(configs[i:])
            break
        t0 = clock()
        try:
            row = measure(cfg)
        except (RuntimeError, NotImplementedError, ValueError) as e:
            msg = f"{type(e).__name__}: {e}"
            res.failed.append((cfg, msg))
            if on_error:
                on_error(cfg, msg)
            continue
        now = clock()
        row["config_s"], row["elapsed_s"] = now - t0, now - start
        res.rows.append(row)
        if on_row:
            on_row(row)
    return res


def describe_skipped(skipped: Sequence[Config]) -> list[str]:
    """One line per (model, pruner, batch): the backends/modes not started."""
    groups: dict[tuple, list[str]] = {}
    for c in skipped:
        groups.setdefault((c.model, c.pruner or "-", c.batch), []).append(f"{c.backend}/{c.mode_label}")
    return [f"{m} {p} B={b}: {', '.join(v)}" for (m, p, b), v in groups.items()]
