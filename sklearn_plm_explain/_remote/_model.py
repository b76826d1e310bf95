"""RemoteModel: a model served over HTTP, queried like a fitted estimator.

The estimator's face only: parameters, the methods a fitted model has, and
what must not leak (headers in ``repr``, pickles and fingerprints). The
request bodies are the codecs' (``_protocols.py``), sending them is the
transport's (``_transport.py``).
"""

# SPDX-License-Identifier: BSD-3-Clause

import threading
from dataclasses import fields
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import ClassifierTags, RegressorTags
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if

from sklearn_plm_explain._checkpoint import fingerprinting
from sklearn_plm_explain._remote._protocols import make_codec, public_url
from sklearn_plm_explain._remote._transport import Policy, Transport

__all__ = ["RemoteModel"]

_PROTOCOLS = ("mlflow", "v2", "json")
_OUTPUTS = ("predict_proba", "decision_function", "predict")


class RemoteModel(BaseEstimator):
    """A model served over HTTP, queried as if it were a fitted estimator.

    Every explainer of this package and the ``plm-explain`` command take a
    ``RemoteModel`` where they take a fitted model: it has ``predict_proba``
    (or ``decision_function``, or ``predict`` for a regressor, whichever the
    endpoint answers with), ``classes_`` and ``n_features_in_``, and it is
    never refitted. Each call is split into requests of at most
    ``max_batch_rows`` rows, up to ``max_concurrency`` of them in flight over
    one pool of connections, and the answers are reassembled in order.
    Connection errors, timeouts, HTTP 429 and 5xx answers are retried with
    exponential back-off and jitter, honouring ``Retry-After``; answers that
    mean bad input (other 4xx) are not. Floats are sent as the shortest text
    that reads back exactly, so a float64 model answers exactly what it would
    answer in-process on the same batch.

    Read more in the :ref:`User Guide <remote>`.

    Parameters
    ----------
    url : str
        Where the model is served. ``"mlflow"``: the server's address
        (``/invocations`` is appended unless present). ``"v2"``: the server's
        address with ``model_name``, or the model's own address
        ``http://host:port/v2/models/NAME[/versions/V]``. ``"json"``: the
        address rows are posted to.
    protocol : {"mlflow", "v2", "json"}, default="mlflow"
        ``"mlflow"``: MLflow's scoring server (``mlflow models serve``),
        ``POST /invocations`` with ``{"inputs": rows}`` (or
        ``{"dataframe_split": ...}`` when ``columns`` are given), answer
        ``{"predictions": ...}``. ``"v2"``: the Open Inference Protocol
        (KServe v2, Seldon MLServer, Triton), ``POST
        /v2/models/NAME/infer`` with one FP64 (or the FP32 the model's
        metadata asks for) input tensor; the model's metadata ``GET
        /v2/models/NAME`` tells the feature count, the output's width and
        datatype. ``"json"``: a home-made service; the body is the JSON list
        of rows, the answer a list of response rows (or an object with it
        under ``"predictions"`` or ``"probabilities"``).
    output : {"predict_proba", "decision_function", "predict"}, \
            default="predict_proba"
        What the endpoint answers with: class probabilities, decision
        function values (logits), or a regressor's prediction. The method of
        that name is the one the model offers (with ``predict`` for a
        classifier computed as the most likely class).
    headers : dict of str to str, default=None
        Sent with every request, e.g. ``{"Authorization": "Bearer ..."}``.
        Their values never appear in messages, logs, ``repr`` or
        checkpoints.
    timeout : float, default=30
        Seconds allowed to connect, and between bytes of an answer.
    max_batch_rows : int, default=1000
        Largest number of rows in one request.
    max_concurrency : int, default=4
        Largest number of requests in flight at once.
    max_retries : int, default=5
        Further attempts of a request after a retryable failure: a timeout, a
        refused or dropped connection, HTTP 429 or a 5xx. What no retry can
        mend fails at once, with its cause chained: a URL that is not
        ``http://`` or ``https://`` with a host (before any request), a host
        name that does not resolve, a 4xx answer. The error of a 5xx quotes
        the server's message.
    max_queries : int, default=None
        Budget of rows sent, retries included. A request that would go past
        it is never sent: :class:`QueryBudgetExceeded` is raised instead
        (a whole call is refused up front when it cannot fit). The budget is
        this object's: it counts from the object's creation, so a run resumed
        from a checkpoint in a new process starts a new count (the rows the
        checkpoint holds are not queried again). For a total over resumes,
        give the resumed run the budget left, ``max_queries -
        stats.rows_sent`` of the earlier run's ``stats``.
    model_name : str, default=None
        ``"v2"``: the model's name, when ``url`` is the server's address.
    output_name : str, default=None
        ``"v2"``: the output tensor to ask for. By default the metadata's only
        output, or the one named like ``output`` (as Seldon MLServer's
        scikit-learn runtime names them).
    classes : array-like, default=None
        The class labels, in the order of the answer's columns. By default
        ``0 .. C-1`` when the width ``C`` is known from v2 metadata; without
        it the explainers find the width with one query.
    n_features : int, default=None
        Number of features, when the protocol's metadata does not tell.
    columns : list of str, default=None
        Feature names. ``"mlflow"`` then sends ``dataframe_split`` payloads
        with these columns, and the model has ``feature_names_in_``.
    backoff : float, default=0.25
        First back-off in seconds; it doubles with every retry (at most 30 s),
        with jitter (a uniform draw between half and all of it).
    random_state : int or None, default=None
        Seeds the jitter (the answers never depend on it).

    Attributes
    ----------
    classes_ : ndarray
        Class labels (classifiers).
    n_features_in_ : int
        Number of features (when given or read from metadata).
    feature_names_in_ : ndarray of str
        ``columns``, when given.
    stats : RemoteStats
        Counters of requests, rows, retries and waiting, so far.

    Examples
    --------
    >>> from sklearn_plm_explain import RemoteModel
    >>> model = RemoteModel("http://127.0.0.1:5000", protocol="mlflow",
    ...                     headers={"Authorization": "Bearer s3cret"})
    >>> model
    RemoteModel(headers={'Authorization': '<redacted>'}, url='http://127.0.0.1:5000')
    """

    _parameter_constraints: dict = {
        "url": [str],
        "protocol": [StrOptions(set(_PROTOCOLS))],
        "output": [StrOptions(set(_OUTPUTS))],
        "headers": [dict, None],
        "timeout": [Interval(Real, 0, None, closed="neither")],
        "max_batch_rows": [Interval(Integral, 1, None, closed="left")],
        "max_concurrency": [Interval(Integral, 1, None, closed="left")],
        "max_retries": [Interval(Integral, 0, None, closed="left")],
        "max_queries": [Interval(Integral, 0, None, closed="left"), None],
        "model_name": [str, None],
        "output_name": [str, None],
        "classes": ["array-like", None],
        "n_features": [Interval(Integral, 1, None, closed="left"), None],
        "columns": ["array-like", None],
        "backoff": [Interval(Real, 0, None, closed="left")],
        "random_state": [Interval(Integral, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        url,
        *,
        protocol="mlflow",
        output="predict_proba",
        headers=None,
        timeout=30.0,
        max_batch_rows=1000,
        max_concurrency=4,
        max_retries=5,
        max_queries=None,
        model_name=None,
        output_name=None,
        classes=None,
        n_features=None,
        columns=None,
        backoff=0.25,
        random_state=None,
    ):
        self.url = url
        self.protocol = protocol
        self.output = output
        self.headers = headers
        self.timeout = timeout
        self.max_batch_rows = max_batch_rows
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.max_queries = max_queries
        self.model_name = model_name
        self.output_name = output_name
        self.classes = classes
        self.n_features = n_features
        self.columns = columns
        self.backoff = backoff
        self.random_state = random_state

    # -- the estimator's face ------------------------------------------------------
    def __sklearn_is_fitted__(self):
        # The served model is trained: nothing to fit, ever.
        return True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        if self.output == "predict":
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        else:
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
        return tags

    def fit(self, X=None, y=None):
        """Do nothing: the served model is trained already.

        Present so that the model can stand where a fitted estimator stands
        (a pipeline step, an explainer's ``estimator``).

        Parameters
        ----------
        X, y : ignored

        Returns
        -------
        self : RemoteModel
        """
        return self

    def __repr__(self, N_CHAR_MAX=700):
        # Header values are secrets, and so may be a URL's credentials or
        # query string: a stand-in with those redacted is shown. The
        # parameters themselves stay intact, so that clone and GridSearchCV
        # work.
        params = self.get_params(deep=False)
        if params["headers"]:
            params["headers"] = dict.fromkeys(params["headers"], "<redacted>")
        params["url"] = public_url(params["url"])
        shown = object.__new__(type(self))
        shown.__dict__.update(params)
        return BaseEstimator.__repr__(shown, N_CHAR_MAX)

    def __getstate__(self):
        if getattr(fingerprinting, "active", False):
            # Hashed for a checkpoint's fingerprint: the model's identity,
            # never its headers.
            return {"identity": self._identity()}
        state = super().__getstate__()
        # Connections, threads, counters and fetched metadata do not travel
        # (joblib's process workers get a copy that opens its own).
        for key in list(state):
            if key.startswith("_") and key != "_sklearn_version":
                del state[key]
        return state

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Close the connections and the threads of the request pool."""
        wire = self.__dict__.get("_wire")
        if wire is not None:
            wire.close()

    @property
    def stats(self):
        """A copy of the counters so far (:class:`RemoteStats`)."""
        return self._transport().stats()

    def reset_stats(self):
        """Set every counter, and the budget used, back to zero."""
        self._transport().reset_stats()

    @property
    def classes_(self):
        if self.output == "predict":
            raise AttributeError("A RemoteModel with output='predict' has no classes_.")
        if self.classes is not None:
            return np.asarray(self.classes)
        width = self._metadata().get("n_outputs")
        if width is None:
            raise AttributeError(
                "The RemoteModel does not know its classes: pass classes=... "
                "(the explainers otherwise find their number with one query)."
            )
        return np.arange(max(int(width), 2))

    @property
    def n_features_in_(self):
        if self.n_features is not None:
            return int(self.n_features)
        if self.columns is not None:
            return len(self.columns)
        width = self._metadata().get("n_features")
        if width is None:
            raise AttributeError(
                "The RemoteModel does not know its number of features: pass "
                "n_features=... (v2 metadata tells it when the server gives it)."
            )
        return int(width)

    @property
    def feature_names_in_(self):
        if self.columns is None:
            raise AttributeError("The RemoteModel has no feature names (columns).")
        return np.asarray([str(c) for c in self.columns], dtype=object)

    def _has(output):
        return lambda self: self.output == output

    @available_if(_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities from the endpoint.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to send (a DataFrame is sent in ``columns`` order).

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)

        Raises
        ------
        ModelResponseError
            For an invalid answer or a request that failed for good, naming
            the request, its rows and the server's message.
        QueryBudgetExceeded
            Before a request that would go past ``max_queries``.
        """
        return self._infer(X)

    @available_if(_has("decision_function"))
    def decision_function(self, X):
        """Decision function values (logits) from the endpoint.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to send.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        out = self._infer(X)
        return out[:, 0] if out.shape[1] == 1 else out

    def predict(self, X):
        """The endpoint's prediction (``output="predict"``), or the most
        likely class of its probabilities or decision values.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to send.

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        out = self._infer(X)
        if self.output == "predict":
            return out[:, 0] if out.shape[1] == 1 else out
        if out.shape[1] == 1:
            idx = (out[:, 0] > 0).astype(np.intp)
        else:
            idx = np.argmax(out, axis=1)
        classes = (
            np.asarray(self.classes)
            if self.classes is not None
            else np.arange(max(out.shape[1], 2))
        )
        return classes[idx]

    del _has

    # -- identity, for checkpoints ----------------------------------------------------
    def _identity(self):
        """What names the served model, without secrets (for fingerprints)."""
        ident = {
            "protocol": self.protocol,
            "url": public_url(self.url),
            "output": self.output,
            "model_name": self.model_name,
            "output_name": self.output_name,
            "classes": None if self.classes is None else np.asarray(self.classes),
            "columns": None if self.columns is None else [str(c) for c in self.columns],
        }
        if self.protocol == "v2":
            meta = self._metadata()
            ident["metadata"] = {
                k: meta.get(k) for k in ("name", "versions", "platform", "raw_outputs")
            }
        return ident

    # -- machinery ------------------------------------------------------------------------
    def _state_lock(self):
        lock = self.__dict__.get("_lock")
        if lock is None:
            lock = self.__dict__.setdefault("_lock", threading.RLock())
        return lock

    def _transport(self):
        # Created on first use and never copied (see __getstate__): the
        # jitter is seeded from random_state as it is then.
        wire = self.__dict__.get("_wire")
        if wire is None:
            with self._state_lock():
                wire = self.__dict__.setdefault("_wire", Transport(self.random_state))
        return wire

    def _policy(self):
        # The parameters of the same names, as they are for this call.
        params = {
            f.name: getattr(self, f.name) for f in fields(Policy) if f.name != "headers"
        }
        headers = tuple((str(k), str(v)) for k, v in (self.headers or {}).items())
        return Policy(headers=headers, **params)

    def _endpoint(self):
        """The protocol's codec and its metadata (``None`` until fetched),
        rebuilt when the parameters that make them change."""
        key = (
            self.protocol,
            self.url,
            self.model_name,
            self.output,
            self.output_name,
            None if self.columns is None else tuple(map(str, self.columns)),
        )
        with self._state_lock():
            cached = self.__dict__.get("_endpoint_cache")
            if cached is None or cached["key"] != key:
                self._validate_params()
                cached = {"key": key, "codec": make_codec(self), "metadata": None}
                self.__dict__["_endpoint_cache"] = cached
            return cached

    def _metadata(self):
        """Facts the protocol can tell: ``n_features``, ``n_outputs``, ...

        Fetched once (v2: ``GET /v2/models/NAME``); empty for protocols
        without metadata.
        """
        with self._state_lock():
            endpoint = self._endpoint()
            if endpoint["metadata"] is None:
                codec = endpoint["codec"]
                if codec.metadata_url is None:
                    endpoint["metadata"] = {}
                else:
                    meta = self._transport().get_metadata(
                        codec.metadata_url, self._policy()
                    )
                    endpoint["metadata"] = codec.read_metadata(meta)
            return endpoint["metadata"]

    def _as_rows(self, X):
        if hasattr(X, "columns") and self.columns is not None:
            missing = [str(c) for c in self.columns if c not in X.columns]
            if missing:
                raise ValueError(f"The rows lack the model's column(s) {missing[:5]}.")
            X = X[list(self.columns)]
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"Expected a 2-D array of rows; got shape {X.shape}.")
        if not np.isfinite(X).all():
            raise ValueError("Rows sent to a RemoteModel must be finite numbers.")
        return np.ascontiguousarray(X)

    def _infer(self, X):
        X = self._as_rows(X)
        codec = self._endpoint()["codec"]
        metadata = self._metadata()
        wire = self._transport()
        wire.count(calls=1)
        if X.shape[0] == 0:
            width = metadata.get("n_outputs") or (
                len(self.classes) if self.classes is not None else 1
            )
            return np.empty((0, int(width)))
        return wire.call(codec, X, self._policy())
