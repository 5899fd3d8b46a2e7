"""`python -m hpuload bench|make-dataset|preview ...`: the hpuload command line."""

import sys

from ._hpuload import cli

if __name__ == "__main__":
    sys.exit(cli(["hpuload", *sys.argv[1:]]))
