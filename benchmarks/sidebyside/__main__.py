import sys

from benchmarks.sidebyside.run import main

sys.exit(main())
