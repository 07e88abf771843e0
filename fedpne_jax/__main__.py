import sys

from fedpne_jax.cli import main

sys.exit(main())
