"""/v1/auth: sign in with the owner token (a session cookie), or once with the link apid printed; sign out.

The guide: "A sign-in is made with the owner token at POST /v1/auth/session. The cookie is HttpOnly,
Secure and SameSite=Strict, and it lasts 12 hours."  These routes are open to every caller that passed
the door (edge.py); each checks what it is given itself.
"""

from __future__ import annotations

import datetime as dt
import hmac
import math

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..auth import SESSION_TTL_S, cookie_value, session_cookie, token_hash
from ..errors import ApiError, Body, read_body
from ..kit import Api, api_of, endpoint

#: Where a used sign-in link sends the browser: the console's front page.
AFTER_SIGN_IN = "/"


class SignInBody(Body):
    token: str


def _signed_in(api: Api, response: Response) -> Response:
    value, _ = api.hub.sessions.open()
    response.headers.append("set-cookie", session_cookie(value))
    return response


@endpoint
async def sign_in(request: Request) -> Response:
    api = api_of(request)
    wait_s = api.hub.sign_ins.attempt((request.scope.get("client") or ("", 0))[0] or "")
    if wait_s is not None:
        raise ApiError("rate_limited", f"too many sign-in attempts from this address; try again in "
                                       f"{math.ceil(wait_s)} seconds")
    body = await read_body(request, SignInBody)
    if not hmac.compare_digest(token_hash(body.token.strip()), api.hub.owner_token_sha256):
        raise ApiError("unauthorized", "that is not the owner token")
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=SESSION_TTL_S)
    return _signed_in(api, JSONResponse({"signed_in": True, "expires_at": expires.isoformat(timespec="seconds")}))


@endpoint
async def sign_out(request: Request) -> Response:
    api_of(request).hub.sessions.close(cookie_value(request.headers.get("cookie")))
    response = JSONResponse({"signed_in": False})
    response.headers.append("set-cookie", session_cookie("", max_age=0))
    return response


@endpoint
async def link(request: Request) -> Response:
    api = api_of(request)
    if not api.hub.sessions.use_link_code(request.query_params.get("code")):
        raise ApiError("sign_in_link_used", "this sign-in link was used already or has expired; "
                                                 "sign in with the owner token")
    return _signed_in(api, RedirectResponse(AFTER_SIGN_IN, status_code=303))


ROUTES = [
    Route("/v1/auth/session", sign_in, methods=["POST"]),
    Route("/v1/auth/session", sign_out, methods=["DELETE"]),
    Route("/v1/auth/link", link, methods=["GET"]),
]
