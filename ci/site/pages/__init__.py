"""The site's pages, each built from the snapshot (`ci.site.model.Snapshot`) and handed to the
writer (`ci.site.writer.PageWriter`); `ci.site.render` composes them into the site it renders.

- `ci.site.pages.site`: `Site`, what every page shares (links, machine labels, the verdicts,
  regressions and steps by series, the rows of the regression and suspicion tables, chart marks);
- `ci.site.pages.markup`: the jinja environment and the HTML cells built outside jinja;
- `ci.site.pages.steps`: each run's change against the run before, for the tables and the lists;
- `ci.site.pages.overview`: the overview, regressions, correctness and commit-list pages;
- `ci.site.pages.series`: a series' page and chart data, and the parameter lists;
- `ci.site.pages.commits`: a commit's page;
- `ci.site.pages.structure`: the structure page (the exact tier).
"""
