from benchmarks.web.run import main

raise SystemExit(main())
