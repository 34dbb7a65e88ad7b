"""``python -m nasrlm`` is the ``nasrlm`` command."""

from nasrlm.cli import main

raise SystemExit(main())
