#!/usr/bin/env python3
"""Entry point in the guest for schedsteal.guest.governor_probe (vm-init.sh puts tools/ on PYTHONPATH)."""
from schedsteal.guest.governor_probe import main

raise SystemExit(main())
