"""``python -m bench [--quick]``: see bench/README.md."""

from bench.main import main

raise SystemExit(main())
