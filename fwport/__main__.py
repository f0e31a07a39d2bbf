from fwport.cli import main

main()
