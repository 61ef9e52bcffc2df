"""``python -m ctxmw`` runs the command line."""

from __future__ import annotations

from ctxmw.cli import main

raise SystemExit(main())
