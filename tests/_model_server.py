"""A scripted model on 127.0.0.1: it answers a real agent's requests with fixed tool calls.

The only fake in the real-agent tests. It speaks the wire format the agent uses, streamed
as the agent asks: OpenAI's Responses API (Codex, and Copilot CLI with a model that
writes patches), its Chat Completions (Copilot CLI's own provider settings), Gemini's
``generateContent`` and ``streamGenerateContent``, and
Anthropic's Messages API (Claude Code). Which step of the script it answers is read from
the request itself (how many tool results the conversation holds so far), so a retried
or extra request gets the same answer: the script is write a file, edit it, run a
command, then finish with text.

It listens on a free port of 127.0.0.1 only, answers at most ``MAX_REQUESTS`` requests,
and stops by itself after ``lifetime`` seconds; leaving the ``with`` block stops it.
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

MAX_REQUESTS = 200


@dataclass(frozen=True)
class Step:
    """One answer of the model: a tool call (``write``, ``edit``, ``shell``) or ``done``."""

    kind: str
    path: str = ""
    text: str = ""  # write: the content; edit: the new text; shell: the command; done: reply
    old: str = ""  # edit: the text replaced


@dataclass
class Model:
    """What the server saw: each request's path and body, and each step it answered."""

    script: list[Step]
    on_step: Callable[[int], None] | None = None
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, done: int) -> Step:
        """Return the step after ``done`` tool results (the last one, ``done``, repeats)."""
        n = min(done, len(self.script) - 1)
        with self.lock:
            first = n not in self.answered
            self.answered.append(n)
        if first and self.on_step is not None:
            self.on_step(n)
        return self.script[n]


# -- the wire formats ------------------------------------------------------------------


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {json.dumps(data)}\n\n")
    return "".join(out).encode()


def _codex(model: Model, body: dict[str, Any]) -> bytes:
    """OpenAI Responses API, streamed: one output item per answer (file edits as patches)."""
    items = body.get("input") or []
    done = sum(
        1
        for i in items
        if isinstance(i, dict)
        and i.get("type") in ("function_call_output", "custom_tool_call_output")
    )
    step = model.step(done)
    call_id = f"call_{done}"
    item: dict[str, Any]
    if step.kind == "write":
        lines = "".join(f"+{line}\n" for line in step.text.splitlines())
        patch = f"*** Begin Patch\n*** Add File: {step.path}\n{lines}*** End Patch\n"
        item = {
            "type": "custom_tool_call",
            "call_id": call_id,
            "name": "apply_patch",
            "input": patch,
        }
    elif step.kind == "edit":
        patch = (
            f"*** Begin Patch\n*** Update File: {step.path}\n@@\n-{step.old}\n+{step.text}\n"
            "*** End Patch\n"
        )
        item = {
            "type": "custom_tool_call",
            "call_id": call_id,
            "name": "apply_patch",
            "input": patch,
        }
    elif step.kind == "shell":
        # Codex's shell tool, or Copilot CLI's when it speaks this API
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        if "exec_command" in tools:
            name, args = "exec_command", {"cmd": step.text, "yield_time_ms": 10000}
        else:
            name, args = "bash", {"command": step.text, "description": "run"}
        item = {
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": json.dumps(args),
        }
    else:
        item = {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "content": [{"type": "output_text", "text": step.text, "annotations": []}],
        }
    item.setdefault("id", f"item_{done}")
    rid = f"resp_{uuid.uuid4().hex[:12]}"
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 20,
    }
    response = {"id": rid, "object": "response", "model": body.get("model", "m")}
    done_response = {**response, "status": "completed", "output": [item], "usage": usage}
    return _sse(
        [
            (
                "response.created",
                {"type": "response.created", "response": {**response, "status": "in_progress"}},
            ),
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            ("response.completed", {"type": "response.completed", "response": done_response}),
        ]
    )


def _completions(model: Model, body: dict[str, Any]) -> bytes:
    """OpenAI Chat Completions, streamed (Copilot CLI's own provider settings)."""
    done = sum(1 for m in body.get("messages") or [] if m.get("role") == "tool")
    step = model.step(done)
    cid = f"chatcmpl-{uuid.uuid4().hex[:12]}"
    if step.kind == "done":
        delta: dict[str, Any] = {"role": "assistant", "content": step.text}
        finish = "stop"
    else:
        name, args = {
            "write": ("create", {"path": step.path, "file_text": step.text}),
            "edit": ("edit", {"path": step.path, "old_str": step.old, "new_str": step.text}),
            "shell": ("bash", {"command": step.text, "description": "run"}),
        }[step.kind]
        call = {
            "index": 0,
            "id": f"call_{done:04d}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        delta = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"

    def chunk(choice_delta: dict[str, Any], reason: str | None) -> dict[str, Any]:
        return {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": 1767225600,
            "model": body.get("model", "m"),
            "choices": [{"index": 0, "delta": choice_delta, "finish_reason": reason}],
        }

    usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    last = {**chunk({}, finish), "usage": usage}
    return _sse([(None, chunk(delta, None)), (None, last)]) + b"data: [DONE]\n\n"


def _gemini_call(step: Step) -> dict[str, Any]:
    if step.kind == "write":
        return {"name": "write_file", "args": {"file_path": step.path, "content": step.text}}
    if step.kind == "edit":
        return {
            "name": "replace",
            "args": {
                "file_path": step.path,
                "old_string": step.old,
                "new_string": step.text,
                "instruction": "edit",
            },
        }
    return {"name": "run_shell_command", "args": {"command": step.text, "description": "run"}}


def _gemini(model: Model, path: str, body: dict[str, Any]) -> bytes:
    """Gemini API: the router's one JSON answer, then one streamed candidate per round."""
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20}
    if "streamGenerateContent" not in path:
        # A side question (the model router, a summary): answered in JSON it can read.
        text = json.dumps(
            {
                "reasoning": "a small change",
                "model_choice": "flash",
                "complexity_reasoning": "a small change",
                "complexity_score": 10,
            }
        )
        doc = {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
            ],
            "usageMetadata": usage,
        }
        return json.dumps(doc).encode()
    done = sum(
        1
        for c in body.get("contents") or []
        for p in c.get("parts") or []
        if isinstance(p, dict) and "functionResponse" in p
    )
    step = model.step(done)
    part = {"text": step.text} if step.kind == "done" else {"functionCall": _gemini_call(step)}
    doc = {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
        "usageMetadata": usage,
    }
    return _sse([(None, doc)])


def _claude(model: Model, body: dict[str, Any]) -> bytes:
    """Anthropic Messages API, streamed: one content block per answer."""
    done = sum(
        1
        for m in body.get("messages") or []
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )
    step = model.step(done)
    if step.kind == "done":
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": step.text}
        stop = "end_turn"
    else:
        name, args = {
            "write": ("Write", {"file_path": step.path, "content": step.text}),
            "edit": (
                "Edit",
                {"file_path": step.path, "old_string": step.old, "new_string": step.text},
            ),
            "shell": ("Bash", {"command": step.text, "description": "run"}),
        }[step.kind]
        block = {"type": "tool_use", "id": f"toolu_{done:04d}", "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
        stop = "tool_use"
    msg = {
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "m"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    return _sse(
        [
            ("message_start", {"type": "message_start", "message": msg}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            ),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 10},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


# -- the server ------------------------------------------------------------------------


def _handler(model: Model) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # the base's names
            pass

        def _send(self, status: int, data: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # the base's name
            self._send(404, b"{}", "application/json")

        def do_HEAD(self) -> None:
            self._send(404, b"", "application/json")

        def do_POST(self) -> None:  # the base's name
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size)
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            with model.lock:
                model.requests.append((self.path, body))
                over = len(model.requests) > MAX_REQUESTS
            if over or not isinstance(body, dict):
                self._send(400, b'{"error": "over the script"}', "application/json")
                return
            if self.path.startswith("/v1/chat/completions"):
                self._send(200, _completions(model, body), "text/event-stream")
            elif self.path.startswith("/v1/responses"):
                self._send(200, _codex(model, body), "text/event-stream")
            elif "/models/" in self.path and "Content" in self.path:
                stream = "streamGenerateContent" in self.path
                kind = "text/event-stream" if stream else "application/json"
                self._send(200, _gemini(model, self.path, body), kind)
            elif self.path.startswith("/v1/messages"):
                if "count_tokens" in self.path:
                    self._send(200, b'{"input_tokens": 10}', "application/json")
                else:
                    self._send(200, _claude(model, body), "text/event-stream")
            else:
                self._send(404, b"{}", "application/json")

    return Handler


@contextmanager
def scripted_model(
    script: list[Step], *, on_step: Callable[[int], None] | None = None, lifetime: float = 300
) -> Iterator[Model]:
    """Serve ``script`` on a free port of 127.0.0.1 until the block ends (or ``lifetime``)."""
    model = Model(script, on_step)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(model))
    server.daemon_threads = True
    model.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="scripted-model", daemon=True)
    thread.start()
    timer = threading.Timer(lifetime, server.shutdown)
    timer.daemon = True
    timer.start()
    try:
        yield model
    finally:
        timer.cancel()
        server.shutdown()
        server.server_close()
        thread.join(10)
