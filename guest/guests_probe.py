#!/usr/bin/env python3
"""Entry point in the guest for schedsteal.guest.guests_probe (vm-init.sh puts tools/ on PYTHONPATH)."""
from schedsteal.guest.guests_probe import main

raise SystemExit(main())
