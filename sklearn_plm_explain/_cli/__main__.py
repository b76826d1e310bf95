"""``python -m sklearn_plm_explain._cli``: the ``plm-explain`` command."""

# SPDX-License-Identifier: BSD-3-Clause

import sys

from sklearn_plm_explain._cli._parser import main

sys.exit(main())
