"""A hosted hub: join codes (/v1/join-codes), a node's redemption (/v1/node/join), owner token rotation.

The guide, "Join codes" and "Owner access".  Making, listing and revoking codes are the owner's; the
redemption is open to any caller (it carries its own proof, the code) and answers every refused code,
and every attempt past five a minute from one address, with the one message "this join code is not
valid".  Rotating the owner token is the owner's, from the hub's own machine only.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from ...commands import nodes as cmd
from ...domain.nodes import TTL_MIN_DEFAULT, check_public_key, invalid_code
from ...joincode import NotACode, parse
from ...projections import nodes as rm
from ..auth import is_loopback, session_of
from ..errors import Body, read_body
from ..kit import api_of, endpoint

#: The redemption's path: open to every caller that passed the door (``app.OPEN_PATHS``).
REDEEM_PATH = "/v1/node/join"


class CodeBody(Body):
    label: str
    ttl_min: int = TTL_MIN_DEFAULT


class RedeemBody(Body):
    code: str
    public_key: str


def client_address(request: Request) -> str:
    return (request.scope.get("client") or ("", 0))[0] or ""


@endpoint
async def list_codes(request: Request) -> dict:
    api = api_of(request)
    return {"codes": await api.query(rm.codes, api.hub.read_models, api.hub.commands.clock())}


@endpoint
async def make_code(request: Request) -> dict:
    api = api_of(request)
    hub = api.hub
    body = await read_body(request, CodeBody)
    ctx = api.context(request)
    made = await api.command(lambda: cmd.make_code(hub.commands, ctx, body.label, body.ttl_min,
                                                   hub.public_url or hub.address, hub.fingerprint))
    return {"code": made}


@endpoint
async def revoke_code(request: Request) -> dict:
    api = api_of(request)
    code_id = request.path_params["id"]
    await api.command(lambda: cmd.revoke_code(api.hub.commands, api.context(request), code_id))
    return {"revoked": code_id}


@endpoint
async def redeem(request: Request) -> dict:
    api = api_of(request)
    hub = api.hub
    address = client_address(request)
    if hub.redemptions.attempt(address) is not None:
        raise invalid_code()
    body = await read_body(request, RedeemBody)
    check_public_key(body.public_key)
    try:
        code = parse(body.code)
    except NotACode:
        raise invalid_code() from None
    ctx = hub.commands.context("hub", None, request.headers.get("x-correlation-id"))
    joined = await api.command(lambda: cmd.redeem(hub.commands, ctx, code.id, code.secret, body.public_key, address))
    if joined is None:
        raise invalid_code()
    return {"node": joined.name, "cid_first": joined.cid_first, "cid_last": joined.cid_last}


@endpoint
async def rotate_owner_token(request: Request) -> dict:
    api = api_of(request)
    hub = api.hub
    ctx = api.context(request)
    here = is_loopback(client_address(request))
    token = await api.query(hub.rotate_owner_token, ctx, here, session_of(request.scope))
    return {"token": token, "file": str(hub.folders.state / "owner-token")}


ROUTES = [
    Route("/v1/join-codes", list_codes),
    Route("/v1/join-codes", make_code, methods=["POST"]),
    Route("/v1/join-codes/{id}/revoke", revoke_code, methods=["POST"]),
    Route(REDEEM_PATH, redeem, methods=["POST"]),
    Route("/v1/hub/owner-token/rotate", rotate_owner_token, methods=["POST"]),
]
