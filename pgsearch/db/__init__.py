"""The store layer: the only part of pgsearch that talks to PostgreSQL."""
