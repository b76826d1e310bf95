"""Models and rows for the command line, read and checked before any query:
a model file (joblib or pickle), a CSV file of rows, targets."""

# SPDX-License-Identifier: BSD-3-Clause

import csv
import os

import numpy as np
from sklearn.base import is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted


class CLIError(Exception):
    """Bad input: reported as one line on stderr, without a traceback."""


def _load_model(path):
    if not os.path.isfile(path):
        raise CLIError(f"model file not found: {path}")
    import joblib

    try:
        model = joblib.load(path)
    except Exception as exc:  # any unpickling failure is bad input here
        raise CLIError(
            f"cannot load a model from {path}: not a file written by joblib.dump "
            f"or pickle, or written with other library versions "
            f"({type(exc).__name__}: {exc})"
        ) from None
    what = type(model).__name__
    if not (hasattr(model, "fit") and hasattr(model, "predict")):
        raise CLIError(
            f"{path} holds a {what}, not a fitted scikit-learn model; save the "
            "fitted model itself with joblib.dump(model, path)"
        )
    try:
        check_is_fitted(model)
    except NotFittedError:
        raise CLIError(
            f"the {what} in {path} is not fitted; call its fit method before "
            "saving it with joblib.dump"
        ) from None
    except (TypeError, AttributeError):
        pass  # a model outside scikit-learn's conventions: used as it is
    if not (_is_regressor(model) or hasattr(model, "predict_proba")):
        raise CLIError(
            f"the model in {path} ({what}) has no predict_proba "
            "and is not a regressor; explain needs a classifier that gives "
            "probabilities or a regressor"
        )
    return model


def _is_regressor(model):
    try:
        return is_regressor(model)
    except (AttributeError, TypeError):  # no scikit-learn tags
        return False


def _read_csv(path, header=True):
    """Numeric rows of a CSV file: ``(names, X)``.

    With ``header`` the first line names the columns; without, they are
    named ``x0``, ``x1``, ... Rows are parsed as they are read (a file of
    many rows never holds all its text as Python strings at once); a bad
    cell is named, and a file that cannot be what was asked (a folder, a
    first line of numbers where names belong, another delimiter) says so.
    """
    if os.path.isdir(path):
        raise CLIError(f"--data {path} is a folder; give the CSV file in it")
    if not os.path.isfile(path):
        raise CLIError(f"data file not found: {path}")
    names, rows = None, []
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                if not row:
                    continue
                if names is None:
                    _check_first_line(row, path, header)
                    names = [c.strip() for c in row] if header else None
                    if header:
                        continue
                    names = [f"x{j}" for j in range(len(row))]
                rows.append(_parse_row(row, names, path, len(rows)))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise CLIError(f"bad CSV {path}: {exc}") from None
    if not rows:
        what = "a header line and at least one row" if header else "at least one row"
        raise CLIError(f"bad CSV {path}: needs {what}")
    return names, np.vstack(rows)


def _check_first_line(row, path, header):
    """Refuse, with the fix, a first line that shows the file is not a
    comma-separated file of the kind asked for."""
    if len(row) == 1:
        for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "bars")):
            if sep in row[0]:
                raise CLIError(
                    f"bad CSV {path}: its fields are separated by {name}; "
                    "plm-explain reads comma-separated files (convert it, e.g. "
                    "pandas.read_csv(path, sep=...).to_csv(new_path, index=False))"
                )
    if header and all(_is_number(cell) for cell in row):
        raise CLIError(
            f"bad CSV {path}: its first line is numbers, not column names; "
            "add a header line, or pass --no-header to read every line as a "
            "row (columns x0, x1, ...)"
        )


def _is_number(cell):
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _parse_row(row, header, path, i):
    if len(row) != len(header):
        raise CLIError(
            f"bad CSV {path}: data row {i + 1} has {len(row)} fields, "
            f"the header has {len(header)}"
        )
    try:
        values = np.array(row, dtype=np.float64)
    except ValueError:
        values = None
    if values is None or not np.isfinite(values).all():
        # Name the first bad cell.
        values = np.array(
            [_number(cell, path, i, header[j]) for j, cell in enumerate(row)]
        )
    return values


def _number(cell, path, i, column):
    """The finite number in one CSV cell, or an error naming the cell."""
    where = f"bad CSV {path}: data row {i + 1}, column {column!r}"
    if not cell.strip():
        raise CLIError(f"{where} is empty; every cell needs a number")
    try:
        value = float(cell)
    except ValueError:
        raise CLIError(f"{where}: {cell!r} is not a number") from None
    if not np.isfinite(value):
        raise CLIError(f"{where}: {cell!r} is not a finite number")
    return value


def _as_model_input(model, names, X):
    """A DataFrame in the model's column order when it was fitted on one."""
    expected = getattr(model, "feature_names_in_", None)
    if expected is None:
        return X, names
    missing = [str(c) for c in expected if c not in names]
    if missing:
        raise CLIError(f"the data lack the model's column(s) {missing[:5]}")
    import pandas as pd

    frame = pd.DataFrame(X, columns=names)[list(expected)]
    return frame, [str(c) for c in expected]


def _check_columns(model, names, X):
    expected = getattr(model, "n_features_in_", None)
    if expected is not None and X.shape[1] != expected:
        raise CLIError(
            f"the data have {X.shape[1]} columns but the model expects "
            f"{expected} features"
        )


def _resolve_target(model, target):
    """The class label whose string form is ``target`` (None stays None)."""
    if target is None:
        return None
    classes = getattr(model, "classes_", None)
    if classes is None:
        raise CLIError("--target needs a model with classes_")
    for label in classes:
        if str(label) == target:
            return label
    known = ", ".join(str(c) for c in classes)
    raise CLIError(f"unknown target {target!r}; the model's classes are: {known}")


def one_line(exc):
    """The message of an error on one line; unexpected kinds carry their name
    (a model failing inside predict_proba, say), ours and the usual ones
    (bad values, missing files) speak for themselves."""
    message = " ".join(str(exc).split()) or "(no message)"
    if isinstance(exc, (CLIError, ValueError, TypeError, OSError, ImportError)):
        return message
    return f"{type(exc).__name__}: {message}"
