from pgsearch.cli import main

main()
