"""``python -m proxy --config FILE``: the same as ``consistent proxy``."""

from proxy.cli import main

raise SystemExit(main())
