"""Data files shipped with pgsearch: the vendored gitleaks secret rules and their licence."""
