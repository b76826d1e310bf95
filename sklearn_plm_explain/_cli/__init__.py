"""The ``plm-explain`` command line: ``demo`` (the digits MLP explained and
checked against its weights) and ``explain`` (a model file or a served
model, rows from a CSV file, explanations to CSV or JSON lines).

Modules: ``_parser`` (the commands and their options), ``_data`` (models and
CSV rows read and checked before any query), ``_explain`` (the explain
command's run and its output) and ``_demo``.
"""

# SPDX-License-Identifier: BSD-3-Clause

from sklearn_plm_explain._cli._parser import build_parser, main

__all__ = ["build_parser", "main"]
