"""OpenAPI post-processing: document the error responses every operation can give.

drf-spectacular documents only the success response of each operation, yet the API answers
refusals with 400/401/403/404/413 in one shape (``governance/api_errors.py``). Without them in
the schema a client (or the fuzzer, ``tests/reliability/test_fuzz_api.py``) cannot tell a
documented refusal from a bug. The rules follow what the code can return:

- 401 and 403: every operation that requires authentication (a missing, wrong or foreign
  credential, or a role that may not do this);
- 400: operations that take a request body or query parameters (input that fails validation),
  and every write (a state change refused as such: submitting a request that is no draft);
- 404: operations with path parameters or a request body (an object named in the path or
  the body that does not exist or is not visible to the caller);
- 413: operations that take a request body (``DATA_UPLOAD_MAX_MEMORY_SIZE``);
- 429: the password endpoint and every operation that accepts a bearer token (users' or
  agents'): failed sign-ins and invalid tokens lock out (``governance.services.lockout``).

It also marks every optional query parameter ``allowEmptyValue``: the API reads ``?name=``
as "not given" (django-filter's convention, kept by the report's own parameters), so a
client building a URL from an empty form field gets the unfiltered answer, not a 400.
"""

from __future__ import annotations

ERROR_SCHEMA = {
    "type": "object",
    "description": "A refusal: a sentence for a person, and the refused fields by path.",
    "properties": {
        "detail": {"type": "string"},
        "errors": {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
        },
    },
    "required": ["detail"],
}
DESCRIPTIONS = {
    "400": "Invalid input; ``errors`` names each refused field.",
    "401": "No valid credentials.",
    "403": "Not allowed for this caller.",
    "404": "No such object, or not visible to this caller.",
    "413": "Request body too large.",
    "429": (
        "Too many failed sign-ins or invalid tokens from this account or address; "
        "Retry-After says when to try again."
    ),
}
METHODS = {"get", "post", "put", "patch", "delete"}


# Endpoints that take a password and lock out guessing (governance.services.lockout).
LOCKED_OUT_PATHS = {"/api/token/"}
# Security schemes whose invalid secrets lock out their client address.
LOCKED_OUT_SCHEMES = {"tokenAuth", "agentToken"}


def error_codes(method: str, operation: dict) -> list[str]:
    """The error statuses ``operation`` can answer with, by the rules in the module doc."""
    parameters = operation.get("parameters", [])
    codes = []
    if operation.get("security") != [{}] and operation.get("security") != []:
        codes += ["401", "403"]
    takes_input = "requestBody" in operation or any(p.get("in") == "query" for p in parameters)
    if takes_input or method != "get":
        codes.append("400")
    if "requestBody" in operation or any(p.get("in") == "path" for p in parameters):
        codes.append("404")
    if "requestBody" in operation:
        codes.append("413")
    if any(LOCKED_OUT_SCHEMES & set(entry) for entry in operation.get("security", [])):
        codes.append("429")
    return codes


def add_error_responses(result: dict, generator, request, public) -> dict:
    """drf-spectacular post-processing hook: add the ``Error`` responses to every operation."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    reference = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, path_item in result.get("paths", {}).items():
        for method, operation in path_item.items():
            if method not in METHODS:
                continue
            if path in LOCKED_OUT_PATHS:
                operation.setdefault("responses", {}).setdefault(
                    "429", {"description": DESCRIPTIONS["429"]}
                )
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "query" and not parameter.get("required"):
                    parameter["allowEmptyValue"] = True
            responses = operation.setdefault("responses", {})
            for code in error_codes(method, operation):
                responses.setdefault(code, {"description": DESCRIPTIONS[code]})
            for code, response in responses.items():
                # Error responses declared by a view (without a body) get the error shape too.
                if code in DESCRIPTIONS and "content" not in response:
                    response["content"] = reference
    return result
