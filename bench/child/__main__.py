import sys

from bench.child.main import main

sys.exit(main())
