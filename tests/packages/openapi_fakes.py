"""Local stand-ins for the outside world of OpenAPI bindings: an https server that serves spec
documents (and redirects), a plain http API that answers like a tiny pet store and records
what it was sent, and the spec describing that API."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

SPEC_HOST = "specs.example.test"
API_HOST = "api.example.test"


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and ``SPEC_HOST``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SPEC_HOST)])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName(SPEC_HOST)]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class SpecServer:
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    redirects: dict[str, str] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def put_json(self, path: str, document: Any) -> str:
        self.files[path] = (json.dumps(document).encode(), "application/json")
        return self.url + path

    def put_raw(self, path: str, body: bytes, content_type: str = "application/yaml") -> str:
        self.files[path] = (body, content_type)
        return self.url + path


@contextmanager
def spec_server(cert: Path, key: Path) -> Iterator[SpecServer]:
    state = SpecServer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            state.hits.append(self.path)
            if self.path in state.redirects:
                self.send_response(302)
                self.send_header("Location", state.redirects[self.path])
                self.end_headers()
                return
            found = state.files.get(self.path)
            if found is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body, content_type = found
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class PetApi:
    seen: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0

    @property
    def base(self) -> str:
        return f"http://{API_HOST}:{self.port}/v1"


@contextmanager
def pet_api() -> Iterator[PetApi]:
    """``/v1/pets`` (list, create) and ``/v1/pets/<id>`` (read, delete)."""
    state = PetApi()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            state.seen.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                }
            )
            path = self.path.split("?", 1)[0]
            if path == "/v1/pets" and self.command == "GET":
                answer: Any = [{"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}]
            elif path == "/v1/pets" and self.command == "POST":
                answer = {"id": 3, **json.loads(body or "{}")}
            elif path.startswith("/v1/pets/"):
                answer = {"id": path.rsplit("/", 1)[1], "method": self.command}
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def petstore(base: str = "https://api.example.com/v1", *, extra: bool = False) -> dict[str, Any]:
    """An OpenAPI 3.0 document for the pet API: two reads, a create and a delete."""
    pet = {"$ref": "#/components/schemas/Pet"}
    pet_id = {"$ref": "#/components/parameters/PetId"}
    ok = {"200": {"description": "ok", "content": {"application/json": {"schema": pet}}}}
    paths: dict[str, Any] = {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List all pets",
                "tags": ["pets"],
                "parameters": [
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                ],
                "responses": ok,
            },
            "post": {
                "operationId": "createPet",
                "summary": "Create a pet",
                "tags": ["pets", "admin"],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": pet}},
                },
                "responses": ok,
            },
        },
        "/pets/{petId}": {
            "parameters": [pet_id],
            "get": {
                "operationId": "showPetById",
                "summary": "Info for one pet",
                "tags": ["pets"],
                "responses": ok,
            },
            "delete": {
                "operationId": "deletePet",
                "summary": "Delete a pet",
                "tags": ["admin"],
                "responses": ok,
            },
        },
    }
    if extra:
        paths["/pets/{petId}/photos"] = {
            "parameters": [pet_id],
            "get": {"summary": "Photos of a pet", "tags": ["pets"], "responses": ok},
        }
    return {
        "openapi": "3.0.3",
        "info": {"title": "Pet Store", "version": "1.2.0", "description": "Pets."},
        "servers": [{"url": base}],
        "tags": [{"name": "pets"}, {"name": "admin"}],
        "paths": paths,
        "components": {
            "schemas": {
                "Pet": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                }
            },
            "parameters": {
                "PetId": {
                    "name": "petId",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string"},
                }
            },
        },
    }
