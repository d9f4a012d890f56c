"""Outputs: what the service tells people.

- `comment`: the pull-request comment (markdown) from verdicts and correctness gates;
  `context` what it says around its tables, `groups` the verdicts' groups and headline (the
  terminal `table` says them too), `markdown` text rendered inert; `structure` its exact series;
- `github`: posting it through the GitHub REST API as one sticky comment per PR
  (`python -m ci.outputs.github`, used by the workflow).
"""
