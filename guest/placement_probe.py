#!/usr/bin/env python3
"""Entry point in the guest for schedsteal.guest.placement_probe (vm-init.sh puts tools/ on PYTHONPATH)."""
from schedsteal.guest.placement_probe import main

raise SystemExit(main())
