"""Static HTML dashboard of the benchmark history, rendered with jinja2 from the results store.

`render_site(store, out_dir)` writes a self-contained site (pages whose tables need no script,
series charts drawn in the browser from data files beside the pages, no network requests when
viewed) and rewrites only the files whose content changed; with nothing new in the store it
reads no results at all. It is the one entry
point the rest of the service calls (`python -m ci dashboard`, the runner); the site itself reads
only `ci.records` (a `StoreReader`: the store's read side) and the verdict functions of
`ci.verdicts`, never the service's orchestration, so the two packages do not import each other.
"""

from dashboard.render import RenderStats, render_site

__all__ = ["RenderStats", "render_site"]
