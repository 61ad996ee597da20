from rar.cli import main

main()
