"""Outputs: what the service tells people.

- `comment`: the pull-request comment (markdown) from verdicts and correctness gates;
- `github`: posting it through the GitHub REST API as one sticky comment per PR
  (`python -m ci.outputs.github`, used by the workflow).
"""
