"""A SCRIPTED FAKE of an OpenAI-compatible server, for tests: it stands in for a paid remote service.

`ScriptedOpenAIServer` listens on real HTTP (127.0.0.1, a free port) and answers each POST to
/v1/chat/completions with the next reply of its script: a normal completion, JSON content, a tool call, an
HTTP error with or without Retry-After, a body that is not JSON, or any of these after a delay. It records
every request it receives. It generates nothing: every reply was written by the test. An exhausted script
answers HTTP 400 ("no scripted reply left"), which the client does not retry, so an under-scripted test fails
loudly, unless a `responder` answers from the request (`ideal_judge.ideal_judge`: deterministic ideal verdicts).
`python -m failatlas.core.llm.ideal_judge [--port 8765]` serves the ideal judge until Ctrl-C.

    with ScriptedOpenAIServer([ScriptedReply.json({"score": 1}), ScriptedReply.error(500)]) as server:
        config = LLMConfig(base_url=server.base_url, model="scripted")
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SCRIPTED_MODEL = "scripted-fake"


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted HTTP reply. Build with the class methods."""

    status: int = 200
    body: Any = None  # a dict is sent as JSON; a str is sent as-is (may be malformed on purpose)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    @classmethod
    def text(
        cls,
        content: str,
        *,
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        finish_reason: str = "stop",
        model: str = SCRIPTED_MODEL,
    ) -> ScriptedReply:
        """A completion whose message content is `content` (which may be malformed JSON on purpose)."""
        return cls(
            body=_completion(
                {"role": "assistant", "content": content},
                finish_reason,
                model,
                prompt_tokens,
                completion_tokens,
            )
        )

    @classmethod
    def json(cls, value: Any, **kwargs: Any) -> ScriptedReply:
        """A completion whose content is `value` serialised as JSON."""
        return cls.text(json.dumps(value), **kwargs)

    @classmethod
    def tool_call(
        cls,
        name: str,
        arguments: dict[str, Any],
        *,
        call_id: str = "call_1",
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
    ) -> ScriptedReply:
        """A completion that asks for one function call."""
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ],
        }
        return cls(body=_completion(message, "tool_calls", SCRIPTED_MODEL, prompt_tokens, completion_tokens))

    @classmethod
    def error(
        cls, status: int, message: str = "scripted error", *, retry_after: float | None = None
    ) -> ScriptedReply:
        """An HTTP error in OpenAI's error format, with a Retry-After header when given."""
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        return cls(
            status=status,
            headers=headers,
            body={"error": {"message": message, "type": "scripted_error", "code": status}},
        )

    @classmethod
    def raw(cls, body: str, *, status: int = 200) -> ScriptedReply:
        """A reply whose HTTP body is exactly `body` (for bodies that are not JSON at all)."""
        return cls(status=status, body=body)

    def after(self, seconds: float) -> ScriptedReply:
        """The same reply, sent only after `seconds` (longer than the client timeout makes a timeout)."""
        return ScriptedReply(self.status, self.body, dict(self.headers), seconds)


_ids = itertools.count(1)


def _completion(
    message: dict[str, Any], finish_reason: str, model: str, prompt_tokens: int, completion_tokens: int
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-scripted-{next(_ids)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


@dataclass(frozen=True)
class RecordedRequest:
    """What the fake received: method, path, headers (names lower-cased) and the JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float


class ScriptedOpenAIServer:
    """A scripted fake OpenAI-compatible server on 127.0.0.1 (see the module docstring)."""

    def __init__(
        self,
        replies: list[ScriptedReply] | tuple[ScriptedReply, ...] = (),
        *,
        responder: Callable[[Any], ScriptedReply] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._script: list[ScriptedReply] = list(replies)
        self.responder = responder  # answers a request's JSON body once the script is spent (ideal_judge)
        self._address = (host, port)
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- script ----------------------------------------------------------------------------------------------
    def enqueue(self, *replies: ScriptedReply) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def _next(self, request: RecordedRequest) -> ScriptedReply:
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.pop(0)
        if self.responder is not None:
            return self.responder(request.body if isinstance(request.body, dict) else {})
        return ScriptedReply.error(400, "scripted fake: no scripted reply left")

    # -- lifecycle -------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the scripted server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def _send(self, reply: ScriptedReply) -> None:
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                body = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = body.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout) before the delayed reply

            def do_GET(self) -> None:  # noqa: N802
                if self.path.split("?")[0].rstrip("/") == "/v1/models":
                    self._send(
                        ScriptedReply(
                            body={
                                "object": "list",
                                # with a responder any model name is answered: none is listed
                                "data": [] if server.responder else [
                                    {"id": SCRIPTED_MODEL, "object": "model", "owned_by": "scripted"}],
                            }
                        )
                    )
                else:
                    self._send(ScriptedReply.error(404, f"no route {self.path}"))

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":  # routes live under /v1
                    self._send(ScriptedReply.error(404, f"no route {self.path}"))
                    return
                recorded = RecordedRequest(
                    "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()
                )
                self._send(server._next(recorded))

        self._httpd = ThreadingHTTPServer(self._address, Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="scripted-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> ScriptedOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

