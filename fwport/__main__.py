from fwport.core.cli import main

main()
