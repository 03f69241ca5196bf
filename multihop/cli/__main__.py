from multihop.cli import main

main()
