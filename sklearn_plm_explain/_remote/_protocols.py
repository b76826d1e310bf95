"""What goes over the wire: the protocols' request and answer bodies.

One codec per protocol knows where rows are posted, how they are written
and how the answer is read back into an array; :func:`read_answer` adds the
checks every protocol shares (JSON, shape, finite values). Nothing here
sends a request: the transport (``_transport.py``) does.
"""

# SPDX-License-Identifier: BSD-3-Clause

import json
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from sklearn_plm_explain._utils._errors import ModelResponseError

# Characters of a server's error message quoted in our messages.
_MESSAGE_CHARS = 500

_V2_FLOATS = {"FP64": np.float64, "FP32": np.float32, "FP16": np.float16}
_V2_NUMBERS = {
    **_V2_FLOATS,
    **{f"INT{b}": np.int64 for b in (8, 16, 32, 64)},
    **{f"UINT{b}": np.int64 for b in (8, 16, 32, 64)},
}


class BadAnswer(Exception):
    """An answer that is not what the protocol says.

    ``query_rows``: the query points of the call concerned, when they are
    fewer than the request's (``None`` means all of them).
    """

    def __init__(self, message, query_rows=None):
        super().__init__(message)
        self.query_rows = query_rows


def make_codec(model):
    """The codec of ``model.protocol``, for the model's current parameters."""
    check_url(model.url)
    codecs = {"mlflow": MLflowCodec, "v2": V2Codec, "json": PlainJSONCodec}
    return codecs[model.protocol](model)


def check_url(url):
    """Refuse, before any request, a URL no retry can reach: one without
    ``http://`` or ``https://`` or without a host."""
    try:
        parts = urlsplit(str(url))
    except ValueError as exc:
        raise ValueError(f"url {public_url(url)!r} is not a URL: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"url must be an http:// or https:// address with a host, such as "
            f"'http://127.0.0.1:5000'; got {public_url(url)!r}."
        )


# -- the codecs ---------------------------------------------------------------------
class MLflowCodec:
    """MLflow's scoring server: ``POST /invocations``."""

    metadata_url = None

    def __init__(self, model):
        url = model.url.rstrip("/")
        if not url.endswith("/invocations"):
            url += "/invocations"
        self.infer_url = url
        self.public_infer_url = "POST " + public_url(url)
        self.columns = (
            None if model.columns is None else [str(c) for c in model.columns]
        )

    def encode(self, X):
        if self.columns is not None:
            return dumps({"dataframe_split": {"columns": self.columns, "data": X}})
        return dumps({"inputs": X})

    def decode(self, obj):
        if not isinstance(obj, dict) or "predictions" not in obj:
            keys = list(obj)[:5] if isinstance(obj, dict) else type(obj).__name__
            raise BadAnswer(
                f"the answer has no 'predictions' (got {keys}); is this an "
                "MLflow scoring server?"
            )
        preds = obj["predictions"]
        if isinstance(preds, dict):
            # A pyfunc returning a dict of columns.
            preds = [preds[k] for k in preds]
            return _as_matrix(preds, "the predictions").T
        if preds and isinstance(preds, list) and isinstance(preds[0], dict):
            # A pyfunc returning a DataFrame: one record per row.
            keys = list(preds[0])
            try:
                preds = [[r[k] for k in keys] for r in preds]
            except (KeyError, TypeError):
                raise BadAnswer("the predictions' records differ in keys") from None
        return _as_matrix(preds, "the predictions")


class PlainJSONCodec:
    """A home-made service: a list of rows in, a list of response rows out."""

    metadata_url = None

    def __init__(self, model):
        self.infer_url = model.url
        self.public_infer_url = "POST " + public_url(model.url)

    def encode(self, X):
        return dumps(X)

    def decode(self, obj):
        if isinstance(obj, dict):
            for key in ("predictions", "probabilities", "outputs"):
                if key in obj:
                    obj = obj[key]
                    break
            else:
                raise BadAnswer(
                    f"the answer is an object without 'predictions' or "
                    f"'probabilities' (keys {list(obj)[:5]})"
                )
        return _as_matrix(obj, "the answer's rows")


class V2Codec:
    """The Open Inference Protocol (KServe v2) over REST.

    The model's metadata (``GET /v2/models/NAME``, read by
    :meth:`read_metadata`) fixes the input tensor's name and datatype and
    the output asked for.
    """

    def __init__(self, model):
        self.output = model.output
        parts = urlsplit(model.url)
        path = parts.path.rstrip("/")
        name, version = model.model_name, None
        if "/v2/models/" in path:
            base, rest = path.split("/v2/models/", 1)
            bits = rest.split("/")
            if name is None:
                name = bits[0]
            if len(bits) >= 3 and bits[1] == "versions":
                version = bits[2]
            path = base
        if not name:
            raise ValueError(
                "protocol='v2' needs the model's name: pass model_name=... or a "
                "url ending in /v2/models/NAME."
            )
        model_path = f"{path}/v2/models/{name}"
        if version is not None:
            model_path += f"/versions/{version}"
        self.name = name
        self.metadata_url = urlunsplit(parts._replace(path=model_path))
        self.infer_url = self.metadata_url + "/infer"
        self.public_infer_url = "POST " + public_url(self.infer_url)
        self.input_name, self.input_dtype = "input-0", "FP64"
        self.output_name = model.output_name

    def read_metadata(self, meta):
        """The facts of the metadata; sets the input and the output to use."""
        if not isinstance(meta, dict):
            meta = {}
        out = {
            "name": meta.get("name"),
            "versions": meta.get("versions"),
            "platform": meta.get("platform"),
        }
        self._read_input(meta.get("inputs") or [], out)
        outputs = meta.get("outputs") or []
        out["raw_outputs"] = [
            (o.get("name"), o.get("datatype"), o.get("shape")) for o in outputs
        ]
        chosen = self._choose_output(outputs)
        if chosen is not None:
            shape = chosen.get("shape") or []
            if len(shape) == 2 and isinstance(shape[1], int) and shape[1] > 0:
                out["n_outputs"] = shape[1]
            elif len(shape) == 1 and self.output == "decision_function":
                out["n_outputs"] = 2
        return out

    def _read_input(self, inputs, out):
        if len(inputs) > 1:
            raise ModelResponseError(
                f"The model {self.name!r} has {len(inputs)} inputs "
                f"({[i.get('name') for i in inputs]}); RemoteModel sends one "
                "tensor of rows.",
                rows=np.empty(0, dtype=np.intp),
            )
        if not inputs:
            return
        tensor = inputs[0]
        self.input_name = tensor.get("name") or self.input_name
        dtype = tensor.get("datatype", "FP64")
        if dtype in ("FP32", "FP64"):
            self.input_dtype = dtype
        shape = tensor.get("shape") or []
        if len(shape) == 2 and isinstance(shape[1], int) and shape[1] > 0:
            out["n_features"] = shape[1]

    def _choose_output(self, outputs):
        names = [o.get("name") for o in outputs]
        if self.output_name is not None:
            if outputs and self.output_name not in names:
                raise ModelResponseError(
                    f"The model {self.name!r} has no output {self.output_name!r}; "
                    f"its outputs are {names}.",
                    rows=np.empty(0, dtype=np.intp),
                )
            return next((o for o in outputs if o.get("name") == self.output_name), None)
        if len(outputs) == 1:
            self.output_name = names[0]
            return outputs[0]
        if self.output in names:
            self.output_name = self.output
            return outputs[names.index(self.output)]
        if outputs:
            raise ModelResponseError(
                f"The model {self.name!r} has outputs {names}: say which one "
                "answers with output_name=...",
                rows=np.empty(0, dtype=np.intp),
            )
        return None

    def encode(self, X):
        if self.input_dtype == "FP32":
            X = X.astype(np.float32).astype(np.float64)
        request = {
            "inputs": [
                {
                    "name": self.input_name,
                    "shape": list(X.shape),
                    "datatype": self.input_dtype,
                    "data": X.ravel(),
                }
            ]
        }
        if self.output_name is not None:
            request["outputs"] = [{"name": self.output_name}]
        return dumps(request)

    def decode(self, obj):
        tensor = self._output_tensor(obj)
        dtype = tensor.get("datatype", "FP64")
        if dtype not in _V2_NUMBERS:
            raise BadAnswer(f"the output's datatype {dtype!r} is not numeric")
        data = _as_matrix(tensor["data"], "the output's data")
        if dtype in _V2_FLOATS:
            # Values written from float32 read back as the float32 they were.
            data = data.astype(_V2_FLOATS[dtype]).astype(np.float64)
        shape = tensor.get("shape")
        try:
            shape = [int(s) for s in shape]
            data = data.reshape(shape)
        except (TypeError, ValueError):
            raise BadAnswer(
                f"the output's data ({data.size} values) do not fit its shape {shape}"
            ) from None
        return data

    def _output_tensor(self, obj):
        if not isinstance(obj, dict):
            raise BadAnswer(f"the answer is a {type(obj).__name__}, not an object")
        if "error" in obj and "outputs" not in obj:
            raise BadAnswer(f"the server says: {obj['error']}")
        outputs = obj.get("outputs")
        if not isinstance(outputs, list) or not outputs:
            raise BadAnswer("the answer has no 'outputs'")
        names = [o.get("name") if isinstance(o, dict) else None for o in outputs]
        if self.output_name is not None:
            if self.output_name not in names:
                raise BadAnswer(
                    f"the answer has no output {self.output_name!r} (outputs: {names})"
                )
            tensor = outputs[names.index(self.output_name)]
        elif len(outputs) == 1:
            tensor = outputs[0]
        else:
            raise BadAnswer(
                f"the answer has outputs {names}: say which one with output_name"
            )
        if not isinstance(tensor, dict) or "data" not in tensor:
            raise BadAnswer("the output tensor has no 'data'")
        return tensor


# -- checks every protocol shares ---------------------------------------------------
def read_answer(codec, content, content_type, where, first, stop):
    """The answer to query points ``first:stop`` of a call, as a 2-D array.

    Raises
    ------
    BadAnswer
        With a message that starts with ``where``: a body that is not JSON,
        not what the protocol says, of the wrong shape, or not finite.
    """
    try:
        obj = loads(content)
    except ValueError:
        raise BadAnswer(
            f"{where} answered with a body that is not JSON ({content_type}): "
            f"{server_message(content)}"
        ) from None
    try:
        out = codec.decode(obj)
    except BadAnswer as exc:
        raise BadAnswer(f"{where}: {exc}") from None
    if out.ndim == 1:
        out = out[:, None]
    if out.ndim != 2 or out.shape[0] != stop - first:
        raise BadAnswer(
            f"{where} answered with an array of shape {out.shape} for "
            f"{stop - first} rows; expected one row per query point."
        )
    bad = ~np.isfinite(out).all(axis=1)
    if bad.any():
        points = first + np.flatnonzero(bad)
        shown = ", ".join(map(str, points[:10])) + (" ..." if points.size > 10 else "")
        raise BadAnswer(
            f"{where} answered with non-finite values (NaN or inf) for "
            f"{points.size} query point(s): {shown} of this call.",
            query_rows=points,
        )
    return out


def server_message(content):
    """What a server's error body says, on one line, at most 500 characters."""
    text = content.decode("utf-8", errors="replace").strip()
    try:
        obj = json.loads(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        parts = [
            str(obj[k])
            for k in ("error_code", "message", "error", "detail")
            if k in obj
        ]
        trace = obj.get("stack_trace")
        if isinstance(trace, str) and trace.strip():
            # MLflow's servers send the model's traceback: its last line
            # says what the model objected to.
            parts.append(trace.strip().splitlines()[-1])
        if parts:
            text = ": ".join(parts)
    text = " ".join(text.split()) or "(empty body)"
    if len(text) > _MESSAGE_CHARS:
        text = text[:_MESSAGE_CHARS] + " ..."
    return text


def public_url(url):
    """The URL without credentials or query string (which may hold keys)."""
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return "<invalid url>"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = "..." if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


# -- JSON -----------------------------------------------------------------------------
def dumps(obj):
    """JSON bytes; floats as the shortest text that reads back exactly.

    orjson (in the ``remote`` extra) is much faster on large arrays than the
    standard library; both write every float64 so that it round-trips
    bitwise.
    """
    try:
        import orjson
    except ImportError:
        return json.dumps(obj, allow_nan=False, separators=(",", ":")).encode()
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)


def loads(content):
    """The JSON value of ``content``; NaN and Infinity are read, not refused."""
    try:
        import orjson
    except ImportError:
        return json.loads(content)
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        # orjson refuses NaN and Infinity, which Python's json reads: let it
        # try, so that such an answer is reported as non-finite values.
        return json.loads(content)


def _as_matrix(values, what):
    try:
        out = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise BadAnswer(
            f"{what} are not an array of numbers (ragged rows, strings or nulls)"
        ) from None
    return out
