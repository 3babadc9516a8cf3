from watcher.entry import main

main()
