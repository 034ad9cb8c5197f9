"""/v1/git: the plaza's git server for the owner (repositories, branches, commits, files, pull requests,
diffs, reviews, merges), and /git/NAME.git: git's smart HTTP protocol, so the owner clones and pushes
with plain ``git`` (the owner token as a bearer token or as the password of HTTP basic auth; from
loopback, none while loopback trust is on)."""

from __future__ import annotations

import base64
import hmac

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...domain.git import MERGE_METHODS, PR_STATES, VERDICTS, pr_number, repo_name
from ...projections import git as rm
from ...runtime.forge import OWNER, server_of
from ...runtime.githttp import GitRequest, body_limit, service_of
from ..auth import bearer_ok, cookie_value, is_loopback, token_hash
from ..errors import ApiError, Body, error_response, read_body, status_of
from ..kit import MAX_LIST_LIMIT, api_of, endpoint

#: The prefix of git's smart HTTP door (outside /v1: it answers git, not JSON).
GIT_PREFIX = "/git/"
#: What a git client is told when it must authenticate (the owner token is the password).
GIT_REALM = 'Basic realm="AgentPlaza git (the owner token is the password)"'


class RepoBody(Body):
    name: str
    project: str | None = None


class PrBody(Body):
    repo: str
    source: str
    target: str | None = None
    title: str
    body: str = ""


class TextBody(Body):
    text: str


class ReviewBody(Body):
    verdict: str
    text: str = ""


class MergeBody(Body):
    method: str = "auto"


class CloseBody(Body):
    reason: str | None = None


def _server(request: Request):
    return server_of(api_of(request).hub)


def _repo(request: Request) -> str:
    return repo_name(request.path_params["repo"])


@endpoint
async def status(request: Request) -> dict:
    api = api_of(request)
    return await api.query(rm.status, api.hub.read_models)


@endpoint
async def repos(request: Request) -> dict:
    api = api_of(request)
    return {"repos": await api.query(rm.repo_rows, api.hub.read_models)}


@endpoint
async def create_repo(request: Request) -> dict:
    api = api_of(request)
    body = await read_body(request, RepoBody)
    name = await api.command(lambda: _server(request).create(OWNER, body.name, body.project))
    return {"repo": await api.query(rm.repo_row, api.hub.read_models, name)}


@endpoint
async def show_repo(request: Request) -> dict:
    api = api_of(request)
    name = _repo(request)
    repo = await api.query(rm.repo_row, api.hub.read_models, name)
    repo["branches"] = await api.query(rm.branch_rows, api.hub.read_models, name)
    return {"repo": repo}


@endpoint
async def branches(request: Request) -> dict:
    api = api_of(request)
    return {"branches": await api.query(rm.branch_rows, api.hub.read_models, _repo(request))}


@endpoint
async def commits(request: Request) -> dict:
    api = api_of(request)
    name = _repo(request)
    repo = await api.query(rm.repo_row, api.hub.read_models, name)
    ref = request.query_params.get("branch") or request.query_params.get("ref") or repo["default_branch"]
    limit = api.int_param(request, "limit", 50, 1, MAX_LIST_LIMIT)
    return {"repo": name, "ref": ref, "commits": await api.query(_server(request).store.log, name, ref, limit)}


@endpoint
async def files(request: Request) -> dict:
    api = api_of(request)
    name = _repo(request)
    repo = await api.query(rm.repo_row, api.hub.read_models, name)
    ref = request.query_params.get("ref") or repo["default_branch"]
    return await api.query(_server(request).store.files, name, ref, request.path_params.get("path") or "")


@endpoint
async def prs(request: Request) -> dict:
    api = api_of(request)
    q = request.query_params
    state = q.get("state") or None
    if state == "all":
        state = None
    if state is not None and state not in PR_STATES:
        raise ApiError("invalid_request", f"state is one of {', '.join(PR_STATES)} or all")
    repo = repo_name(q["repo"]) if q.get("repo") else None
    limit = api.int_param(request, "limit", 100, 1, MAX_LIST_LIMIT)
    return {"prs": await api.query(rm.pr_rows, api.hub.read_models, repo, state, limit)}


@endpoint
async def open_pr(request: Request) -> dict:
    api = api_of(request)
    b = await read_body(request, PrBody)
    number = await api.command(lambda: _server(request).open_pr(OWNER, b.repo, b.source, b.target, b.title, b.body))
    return {"pr": await api.query(rm.pr_row, api.hub.read_models, number)}


@endpoint
async def show_pr(request: Request) -> dict:
    api = api_of(request)
    return {"pr": await api.query(rm.pr_row, api.hub.read_models, pr_number(request.path_params["pr"]))}


@endpoint
async def diff(request: Request) -> dict:
    api = api_of(request)
    number = pr_number(request.path_params["pr"])
    return {"pr": number, **await api.query(_server(request).diff, number)}


async def _pr_answer(request: Request, number: str) -> dict:
    api = api_of(request)
    return {"pr": await api.query(rm.pr_row, api.hub.read_models, number)}


@endpoint
async def comment(request: Request) -> dict:
    api = api_of(request)
    b = await read_body(request, TextBody)
    number = pr_number(request.path_params["pr"])
    await api.command(lambda: _server(request).comment(OWNER, number, b.text))
    return await _pr_answer(request, number)


@endpoint
async def review(request: Request) -> dict:
    api = api_of(request)
    b = await read_body(request, ReviewBody)
    if b.verdict not in VERDICTS:
        raise ApiError("invalid_verdict", f"a review is {' or '.join(VERDICTS)}")
    number = pr_number(request.path_params["pr"])
    await api.command(lambda: _server(request).review(OWNER, number, b.verdict, b.text))
    return await _pr_answer(request, number)


@endpoint
async def merge(request: Request) -> dict:
    api = api_of(request)
    b = await read_body(request, MergeBody)
    if b.method not in MERGE_METHODS:
        raise ApiError("invalid_request", f"method is one of {', '.join(MERGE_METHODS)}")
    number = pr_number(request.path_params["pr"])
    await api.command(lambda: _server(request).merge(OWNER, number, b.method))
    return await _pr_answer(request, number)


@endpoint
async def close(request: Request) -> dict:
    api = api_of(request)
    await read_body(request, CloseBody)
    number = pr_number(request.path_params["pr"])
    await api.command(lambda: _server(request).close(OWNER, number))
    return await _pr_answer(request, number)


# -- git's smart HTTP door ------------------------------------------------------------------------------


def owner_may(request: Request) -> bool:
    """The owner: the token as a bearer token or as basic auth's password, a sign-in's cookie, or loopback."""
    hub = api_of(request).hub
    auth = request.headers.get("authorization")
    if bearer_ok(auth, hub.owner_token_sha256):
        return True
    if auth and auth.lower().startswith("basic "):
        try:
            password = base64.b64decode(auth[6:].strip(), validate=True).decode().split(":", 1)[1]
        except (ValueError, IndexError, UnicodeDecodeError):
            return False
        return hmac.compare_digest(token_hash(password), hub.owner_token_sha256)
    if hub.sessions.valid(cookie_value(request.headers.get("cookie", ""))):
        return True
    client = request.client.host if request.client else None
    return hub.loopback_trust and is_loopback(client)


async def _read_capped(request: Request, limit: int) -> bytes | None:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def smart_http(request: Request) -> Response:
    api = api_of(request)
    try:
        name = repo_name(request.path_params["repo"])
        rest = request.path_params["rest"]
        pre = GitRequest(name, rest, request.method, request.url.query, {}, b"")
        service = service_of(pre)
        if not owner_may(request):
            return Response("the owner token is the password\n", 401, {"WWW-Authenticate": GIT_REALM},
                            media_type="text/plain")
        body = await _read_capped(request, body_limit(service))
        if body is None:
            return error_response(413, "push_too_large", f"a request to {service} is at most "
                                  f"{body_limit(service) >> 20} MiB")
        req = GitRequest(name, rest, request.method, request.url.query,
                         {k.lower(): v for k, v in request.headers.items()}, body)
        answer = await api.command(lambda: _server(request).http(OWNER, req))
    except ApiError as e:
        return error_response(status_of(e), e.code, e.message)
    except Exception as e:  # a Refusal (the domain's), answered in the error shape
        code = getattr(e, "code", None)
        if code is None:
            raise
        return error_response(status_of(e), code, e.message)
    return Response(answer.body, answer.status, dict(answer.headers))


ROUTES = [
    Route("/v1/git/status", status),
    Route("/v1/git/repos", repos),
    Route("/v1/git/repos", create_repo, methods=["POST"]),
    Route("/v1/git/repos/{repo}", show_repo),
    Route("/v1/git/repos/{repo}/branches", branches),
    Route("/v1/git/repos/{repo}/commits", commits),
    Route("/v1/git/repos/{repo}/files", files),
    Route("/v1/git/repos/{repo}/files/{path:path}", files),
    Route("/v1/git/prs", prs),
    Route("/v1/git/prs", open_pr, methods=["POST"]),
    Route("/v1/git/prs/{pr}", show_pr),
    Route("/v1/git/prs/{pr}/diff", diff),
    Route("/v1/git/prs/{pr}/comment", comment, methods=["POST"]),
    Route("/v1/git/prs/{pr}/review", review, methods=["POST"]),
    Route("/v1/git/prs/{pr}/merge", merge, methods=["POST"]),
    Route("/v1/git/prs/{pr}/close", close, methods=["POST"]),
    Route("/git/{repo}.git/{rest:path}", smart_http, methods=["GET", "POST"]),
]
