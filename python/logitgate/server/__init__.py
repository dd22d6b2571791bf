"""``logitgate serve``: an OpenAI-compatible HTTP server with structured outputs and strict
function tools, decoding concurrent requests in one batch (see docs/server.md).

Modules, one concern each: :mod:`.protocol` (OpenAI's request and response shapes, errors),
:mod:`.structures` (response_format / structured_outputs to a compiled grammar, the compile
cache), :mod:`.tools` (the tool-call prompt, output format and parsing), :mod:`.engine` (the
batched decoding loop), :mod:`.kv` (the batch's KV cache), :mod:`.app` (routes and streams),
:mod:`.metrics` (Prometheus). Needs the ``server`` extra (FastAPI, uvicorn, prometheus-client).
"""

from __future__ import annotations

from .app import ServerSettings, create_app

__all__ = ["ServerSettings", "create_app"]
