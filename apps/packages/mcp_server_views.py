"""Account pages for the person's remote MCP servers: the list, adding one, one server's page
(its tools; reconnect, refresh, enable/disable, remove, authorize) and the OAuth callback.
Every view reads and writes the signed-in user's rows only, through ``services.mcp_servers``;
another person's server id is not found."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts.page_writes import guarded_page_write
from apps.accounts.policy import write_guard
from apps.packages.pages import problem_page as _problem
from apps.packages.pages import stable_id as _uid
from apps.packages.services import mcp_servers
from kody.errors import InvalidInput, KodyError

ACTIONS = ("reconnect", "refresh", "enable", "disable", "remove", "authorize")


@login_required
@require_GET
def server_list(request: HttpRequest) -> HttpResponse:
    servers = mcp_servers.listing(_uid(request))
    return render(request, "packages/mcp_servers.html", {"servers": servers})


@never_cache
@login_required
@require_GET
def server_list_json(request: HttpRequest) -> JsonResponse:
    """What /account/mcp-servers shows; no credential of any server is in it."""
    return JsonResponse({"servers": mcp_servers.listing(_uid(request))})


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def server_detail_json(request: HttpRequest, server_id: str) -> JsonResponse:
    """GET: the server and its tools. POST (``action`` as on the page): the change, answered
    with the server as it is now (``authorize`` answers the URL to open instead)."""
    uid = _uid(request)
    try:
        if request.method == "POST":
            with write_guard(request.user, "ui:mcp_server_json"):
                answer = _apply_action(uid, server_id, request.POST.get("action", ""))
            if answer is not None:
                return JsonResponse(answer)
        server = mcp_servers.get(uid, server_id)
        tools = mcp_servers.tools(uid, server_id)
    except KodyError as exc:
        return JsonResponse({"error": exc.as_dict()}, status=exc.status)
    return JsonResponse({"server": server, "tools": tools})


def _apply_action(uid: str, server_id: str, action: str) -> dict[str, Any] | None:
    """The page's and the JSON twin's POST ``action``: what was removed, the authorize URL,
    else None."""
    if action not in ACTIONS:
        raise InvalidInput(
            "action must be one of: " + ", ".join(ACTIONS) + ".", details={"field": "action"}
        )
    if action == "remove":
        return dict(mcp_servers.remove(uid, server_id))
    if action == "authorize":
        return {"authorizeUrl": mcp_servers.authorize_start(uid, server_id)}
    if action == "reconnect":
        mcp_servers.reconnect(uid, server_id)
    elif action == "refresh":
        mcp_servers.refresh(uid, server_id)
    else:
        mcp_servers.set_enabled(uid, server_id, action == "enable")
    return None


@login_required
@require_http_methods(["GET", "POST"])
@guarded_page_write
def server_new(request: HttpRequest) -> HttpResponse:
    form = {"name": "", "url": ""}
    error = None
    if request.method == "POST":
        form = {"name": request.POST.get("name", ""), "url": request.POST.get("url", "")}
        try:
            server = mcp_servers.add(_uid(request), form["name"][:64], form["url"][:2048])
        except KodyError as exc:
            error = exc
        else:
            return redirect("packages:mcp_server", server_id=server["id"])
    status = error.status if error else 200
    context = {"form": form, "error": error}
    return render(request, "packages/mcp_server_new.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
@guarded_page_write
def server_detail(request: HttpRequest, server_id: str) -> HttpResponse:
    uid = _uid(request)
    try:
        if request.method == "POST":
            action = request.POST.get("action", "")
            if action not in ACTIONS:
                return HttpResponse("Unknown action.", status=400)
            done = _apply_action(uid, server_id, action)
            if action == "remove":
                return redirect("packages:mcp_servers")
            if action == "authorize":
                url = str(done["authorizeUrl"]) if done else ""
                if urlsplit(url).scheme not in ("https", "http"):
                    return HttpResponse(
                        "The server named an unusable authorization URL.", status=502
                    )
                return HttpResponseRedirect(url)
            return redirect("packages:mcp_server", server_id=server_id)
        server = mcp_servers.get(uid, server_id)
        tools = mcp_servers.tools(uid, server_id)
    except KodyError as exc:
        return _problem(request, exc, "MCP server")
    return render(request, "packages/mcp_server.html", {"server": server, "tools": tools})


@login_required
@require_GET
def oauth_callback(request: HttpRequest) -> HttpResponse:
    """Where the server's authorization server sends the person back; the state ties it to an
    authorization this person started, so another person's link is not found."""
    state, code = request.GET.get("state", "")[:512], request.GET.get("code", "")[:2048]
    if request.GET.get("error") or not state or not code:
        exc = mcp_servers.AuthorizationNotFound("The server did not authorize Kody.")
        return _problem(request, exc, "MCP server not authorized")
    try:
        # A GET that writes (the redirect back is a GET), so it takes the write guard itself.
        with write_guard(request.user, "ui:mcp_server_oauth_callback"):
            server_id = mcp_servers.authorize_finish(_uid(request), state, code)
    except KodyError as exc:
        return _problem(request, exc, "MCP server not authorized")
    return redirect("packages:mcp_server", server_id=server_id)
