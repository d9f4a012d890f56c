"""Static HTML dashboard of the benchmark history, rendered with jinja2 from the results store.

`render_site(store, out_dir)` writes a self-contained site (pages whose tables need no script,
series charts drawn in the browser from data files beside the pages, no network requests when
viewed) and rewrites only the files whose content changed; with nothing new in the store it
reads no results at all. It is the one entry
point the rest of the service calls: the service's edges (`ci.cli` for `python -m ci dashboard`,
`ci.runner`, `ci.demo`, `ci.outputs`) orchestrate it. The site is a layer over the service's core:
it reads only `ci.records` (a `StoreReader`: the store's read side), `ci.format`, `ci.forking` and
the verdict functions of `ci.verdicts`, never the edges, and no module of the core imports it
(tests/test_layering.py holds both rules).
"""

from ci.site.render import RenderStats, render_site

__all__ = ["RenderStats", "render_site"]
