"""The site's pages, each built from the snapshot (`dashboard.model.Snapshot`) and handed to the
writer (`dashboard.writer.PageWriter`); `dashboard.render` composes them into the site it renders.

- `dashboard.pages.site`: `Site`, what every page shares (links, machine labels, the verdicts,
  regressions and steps by series, the rows of the regression and suspicion tables, chart marks);
- `dashboard.pages.markup`: the jinja environment and the HTML cells built outside jinja;
- `dashboard.pages.steps`: each run's change against the run before, for the tables and the lists;
- `dashboard.pages.overview`: the overview, regressions, correctness and commit-list pages;
- `dashboard.pages.series`: a series' page and chart data, and the parameter lists;
- `dashboard.pages.commits`: a commit's page;
- `dashboard.pages.structure`: the structure page (the exact tier).
"""
