"""The service half: asv results → store → verdicts → PR comment → dashboard. Never imports torch.

Core (plain Python over the store): `records` (the typed records), `exit_codes`, `store`, `ingest`,
`verdicts`. Edges: `outputs` (PR comment, GitHub), `runner` (the benchmark jobs), `cli`
(`python -m ci`), `demo`; they call the site only through `ci.site.render_site`.
tests/test_layering.py holds the allowed import directions.
"""
