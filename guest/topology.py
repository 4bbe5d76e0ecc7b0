#!/usr/bin/env python3
"""Entry point in the guest for schedsteal.guest.topology (vm-init.sh puts tools/ on PYTHONPATH)."""
from schedsteal.guest.topology import main

raise SystemExit(main())
