"""The service half: asv results → store → verdicts → PR comment → dashboard. Never imports torch."""
