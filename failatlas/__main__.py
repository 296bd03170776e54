from failatlas.cli import main

main()
