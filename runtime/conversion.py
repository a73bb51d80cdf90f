"""A CRD conversion webhook's wire format: a ConversionReview in, its response out.

The API server sends `request{uid, desiredAPIVersion, objects[]}` whenever it must read
or write an object in a version other than the one it is stored in, and uses the answer
only when `result.status` is Success and every object came back (same uid, same
metadata but labels and annotations). The conversion itself is the caller's: a
function of one object and the version wanted, raising `Refused` with a message that
the API server passes on to whoever asked (so it must name no value).

Served beside the admission reviews (runtime/admission.py), on the same port and
certificate."""

from __future__ import annotations

from collections.abc import Callable

from runtime.jsonobj import Json

API_VERSION = "apiextensions.k8s.io/v1"
Convert = Callable[[Json, str], Json]


class Refused(ValueError):
    """The object cannot be converted as asked; the message says why."""


class Malformed(ValueError):
    """The body is no ConversionReview with a request."""


def answer(body: object, convert: Convert) -> Json:
    """The ConversionReview answering `body`: every object converted, or a Failure naming
    why the first that could not be failed (the API server then fails the request)."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise Malformed("expected a ConversionReview with a request")
    desired = request.get("desiredAPIVersion")
    objects = request.get("objects")
    if not isinstance(desired, str) or not isinstance(objects, list):
        raise Malformed("expected desiredAPIVersion and objects")
    response: Json = {"uid": request["uid"]}
    try:
        response["convertedObjects"] = [convert(_object(o), desired) for o in objects]
        response["result"] = {"status": "Success"}
    except Refused as refused:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": str(refused)}
    return {"apiVersion": API_VERSION, "kind": "ConversionReview", "response": response}


def _object(value: object) -> Json:
    if not isinstance(value, dict):
        raise Refused("an object to convert is not a JSON object")
    return value
