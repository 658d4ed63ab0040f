"""``python -m foveal`` (and ``torchrun -m foveal``) run the command line."""

import sys

from foveal.cli import main

if __name__ == "__main__":
    sys.exit(main())
