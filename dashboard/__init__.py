"""Static HTML dashboard of the benchmark history, rendered with jinja2 from the results store.

`render_site(store, out_dir)` writes a self-contained site (inline SVG charts, no network
requests when viewed) and rewrites only the pages whose content changed. It is the one entry
point the rest of the service calls (`python -m ci dashboard`, the runner); the site itself reads
only `ci.records` (a `StoreReader`: the store's read side) and the verdict functions of
`ci.verdicts`, never the service's orchestration, so the two packages do not import each other.
"""

from dashboard.render import DEFAULT_TITLE, RenderStats, render_site

__all__ = ["DEFAULT_TITLE", "RenderStats", "render_site"]
