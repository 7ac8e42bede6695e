"""Benchmarks for pgsearch: a seeded corpus generator, speed and quality harnesses."""
