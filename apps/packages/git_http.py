"""Git remotes over smart HTTP: ``GET|POST /git/<sourceId>.git/...``.

Served by the web process with dulwich's protocol handlers. Every request carries a repo token
(``Authorization: Bearer kgr_...`` through ``git -c http.extraHeader=...``, or as the Basic
password): no token, an unknown or expired one → 401; a token for another repo (another user's
included) or a read token pushing → 403. Nothing is read or written before that.
"""

from __future__ import annotations

import base64
import gzip
import io
import logging
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from dulwich.errors import GitProtocolError
from dulwich.protocol import ReceivableProtocol
from dulwich.server import Backend

from apps.packages.models import EntitySource
from apps.packages.models.gitstore import RepoTokenAccess
from apps.packages.services import repo_tokens
from apps.packages.services.git.receive import MAX_PACK_BYTES, GuardedReceivePack
from apps.packages.services.git.repo import SourceRepo
from apps.packages.services.git.upload import ReusingUploadPack
from kody.callers import account_policy

log = logging.getLogger(__name__)

SERVICES = {"git-upload-pack": ReusingUploadPack, "git-receive-pack": GuardedReceivePack}
# Headroom over the pack limit for the ref commands in front of it.
MAX_BODY_BYTES = MAX_PACK_BYTES + (1 << 20)


class _OneRepo(Backend):
    def __init__(self, repo: SourceRepo) -> None:
        self.repo = repo

    def open_repository(self, path: str) -> SourceRepo:  # type: ignore[override]
        return self.repo


def _plain(status: int, text: str, **headers: str) -> HttpResponse:
    response = HttpResponse(text + "\n", status=status, content_type="text/plain")
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def _raw_token(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            _user, _, password = base64.b64decode(value.strip()).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        return password
    return None


def _authorize(request: HttpRequest, source_id: str, service: str) -> Any:
    """The token's owner, or the refusal to send."""
    token = repo_tokens.authenticate(_raw_token(request))
    if token is None:
        return _plain(
            401,
            "A valid repo token is required (packageGetGitRemote / repoGetGitRemote).",
            WWW_Authenticate='Basic realm="Kody git"',
        )
    if token.source_id != source_id:
        return _plain(403, "This token is for another repository.")
    if service == "git-receive-pack" and token.access != RepoTokenAccess.WRITE:
        return _plain(403, 'This is a read token; ask for access "write" to push.')
    owner = get_user_model().objects.filter(stable_user_id=token.user_id).first()
    if owner is None or not account_policy().may_act(owner):
        return _plain(403, "This account cannot use its repositories now.")
    source = EntitySource.objects.filter(id=source_id, user_id=token.user_id).first()
    if source is None:
        return _plain(404, "Repository not found.")
    return owner, source


def _run(handler_cls: type, repo: SourceRepo, read: Callable[[int], bytes], **flags: bool) -> bytes:
    out = io.BytesIO()

    def write(data: bytes) -> int:
        out.write(data)
        return len(data)

    proto = ReceivableProtocol(read, write)
    handler = handler_cls(_OneRepo(repo), [repo.repo_id], proto, stateless_rpc=True, **flags)
    handler.handle()
    return out.getvalue()


@csrf_exempt
def info_refs(request: HttpRequest, source_id: str) -> HttpResponse:
    service = request.GET.get("service", "")
    if request.method != "GET":
        return _plain(405, "Method not allowed.")
    if service not in SERVICES:
        return _plain(403, "Only the smart HTTP protocol is served.")
    verdict = _authorize(request, source_id, service)
    if isinstance(verdict, HttpResponse):
        return verdict
    _owner, source = verdict
    repo = SourceRepo(source.repo_id)
    out = io.BytesIO()

    def write(data: bytes) -> int:
        out.write(data)
        return len(data)

    proto = ReceivableProtocol(io.BytesIO().read, write)
    proto.write_pkt_line(b"# service=" + service.encode() + b"\n")
    proto.write_pkt_line(None)
    handler = SERVICES[service](
        _OneRepo(repo), [repo.repo_id], proto, stateless_rpc=True, advertise_refs=True
    )
    handler.handle()
    return _result(out.getvalue(), f"application/x-{service}-advertisement")


def _result(body: bytes, content_type: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-cache, max-age=0, must-revalidate"
    return response


def _bounded_reader(request: HttpRequest) -> Callable[[int], bytes]:
    stream: Any = request
    if request.headers.get("Content-Encoding", "") in ("gzip", "x-gzip"):
        stream = gzip.GzipFile(fileobj=request, mode="rb")
    taken = 0

    def read(n: int = -1) -> bytes:
        nonlocal taken
        data = stream.read(n)
        taken += len(data)
        if taken > MAX_BODY_BYTES:
            raise OSError("request body over the push limit")
        return data

    return read


def _service(name: str) -> Callable[[HttpRequest, str], HttpResponse]:
    @csrf_exempt
    def view(request: HttpRequest, source_id: str) -> HttpResponse:
        if request.method != "POST":
            return _plain(405, "Method not allowed.")
        if request.content_type != f"application/x-{name}-request":
            return _plain(415, "Unexpected content type.")
        length = request.headers.get("Content-Length")
        if length and length.isdigit() and int(length) > MAX_BODY_BYTES:
            return _plain(413, f"Push refused: over {MAX_PACK_BYTES // (1 << 20)} MiB.")
        verdict = _authorize(request, source_id, name)
        if isinstance(verdict, HttpResponse):
            return verdict
        owner, source = verdict
        repo = SourceRepo(source.repo_id)
        repo.owner_id = source.user_id  # whose storage_bytes a push's packs count against
        read = _bounded_reader(request)
        try:
            if name == "git-receive-pack":
                with account_policy().write_guard(owner, "git push"):
                    body = _run(SERVICES[name], repo, read)
            else:
                body = _run(SERVICES[name], repo, read)
        except OSError as exc:
            log.info("git %s on %s refused: %s", name, source.id, exc)
            return _plain(413, "Push refused: the request is over the size limit.")
        except (GitProtocolError, ValueError, EOFError) as exc:
            # HangupException is a GitProtocolError: a truncated or garbled request body.
            log.info("git %s on %s: bad request (%s)", name, source.id, type(exc).__name__)
            return _plain(400, "Not a git protocol request this server understands.")
        return _result(body, f"application/x-{name}-result")

    view.__name__ = name.replace("-", "_")
    return view


upload_pack = _service("git-upload-pack")
receive_pack = _service("git-receive-pack")
