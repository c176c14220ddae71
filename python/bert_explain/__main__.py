"""``python -m bert_explain``: the ``bert-explain`` command line."""

import sys

from .cli import main

sys.exit(main())
