from pgsearch.cli import run

run()
