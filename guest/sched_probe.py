#!/usr/bin/env python3
"""Entry point in the guest for schedsteal.guest.steal_probe (vm-init.sh puts tools/ on PYTHONPATH)."""
from schedsteal.guest.steal_probe import main

raise SystemExit(main())
