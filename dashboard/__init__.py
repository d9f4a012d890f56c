"""Static HTML dashboard of the benchmark history, rendered with jinja2 from the results store.

`render_site(store, out_dir)` writes a self-contained site (inline SVG charts, no network
requests when viewed) and rewrites only the pages whose content changed.
"""

from dashboard.render import DEFAULT_TITLE, RenderStats, render_site

__all__ = ["DEFAULT_TITLE", "RenderStats", "render_site"]
