"""``plm-explain serve``: a fitted explainer served over HTTP under uvicorn."""

# SPDX-License-Identifier: BSD-3-Clause

import sys
import warnings

from sklearn_plm_explain._cli._data import (
    CLIError,
    _as_model_input,
    _check_columns,
    _load_model,
    _read_csv,
)
from sklearn_plm_explain._cli._explain import _make_explainer, _remote_model


def build_service_app(args):
    """The fitted explainer's application, as the options describe it."""
    try:
        from sklearn_plm_explain._server import make_app
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise CLIError(_SERVE_EXTRA) from exc
    model = _load_model(args.model) if args.url is None else None
    names, X = _read_csv(args.data, header=not args.no_header)
    if model is None:
        # The budget is each request's (the service's), not the process's.
        model = _remote_model(args, names, budget=False)
    X, names = _as_model_input(model, names, X)
    _check_columns(model, names, X)
    explainer = _make_explainer(model, args, names)
    explainer.set_params(verbose=0)
    with warnings.catch_warnings():
        # The CSV carries no feature names the model could check.
        warnings.filterwarnings("ignore", message="X does not have valid feature")
        explainer.fit(X)
    try:
        return make_app(
            explainer,
            args.name,
            max_concurrency=args.max_explanations,
            max_queries=args.max_queries,
            max_rows=args.max_rows,
        )
    except ModuleNotFoundError as exc:
        raise CLIError(_SERVE_EXTRA) from exc


_SERVE_EXTRA = (
    "plm-explain serve needs starlette and uvicorn: install them with "
    '`pip install "sklearn-plm-explain[serve]"`'
)


def run_serve(args):
    """Serve explanations until interrupted."""
    app = build_service_app(args)
    try:
        import uvicorn
    except ImportError as exc:
        raise CLIError(_SERVE_EXTRA) from exc
    name = app.state.service.name
    print(
        f"serving {type(app.state.service.explainer).__name__} as {name!r} on "
        f"http://{args.host}:{args.port} (POST /v1/models/{name}:explain, "
        f"/v2/models/{name}/infer, /v1/models/{name}/jobs)",
        file=sys.stderr,
    )
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        app.state.service.close()
    return 0
