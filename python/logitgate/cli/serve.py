"""``logitgate serve``: the OpenAI-compatible server (:mod:`logitgate.server`) on uvicorn."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from logitgate.errors import LogitgateError

if TYPE_CHECKING:
    from logitgate.server import ServerSettings

__all__ = ["add_serve_command", "server_settings"]

DEFAULT_TRACE_REQUESTS = 64  # logitgate.server.traces.DEFAULT_TRACE_CAPACITY, without importing the server
DEFAULT_CACHE_DIR_BYTES = 1024**3  # logitgate.disk_cache.DEFAULT_DISK_CACHE_BYTES


class ServeError(LogitgateError):
    """``logitgate serve`` cannot start: the server extra is missing, or the model cannot load."""

    code = "serve"


def add_serve_command(sub: Any) -> None:
    from .main import EXIT_CODES

    p = sub.add_parser(
        "serve",
        help="serve a model over OpenAI's HTTP API with structured outputs (default: the embedded SmolLM2-135M)",
        description="An OpenAI-compatible server: /v1/chat/completions, /v1/completions, /v1/models, /health, "
        "/metrics (see docs/server.md). Needs the server extra: pip install 'logitgate[server]'.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model",
        metavar="PATH",
        help="a transformers model folder or a .gguf file (default: the embedded SmolLM2-135M-Instruct)",
    )
    p.add_argument("--model-name", metavar="NAME", help="the name clients send as 'model' (default: from --model)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="weights' dtype (default: float32: batched prefill is compute-bound, where CPUs without native "
        "bfloat16 run it several times slower)",
    )
    p.add_argument("--max-batch", type=int, default=16, metavar="N", help="sequences decoded together (default: 16)")
    p.add_argument(
        "--batching",
        choices=("packed", "padded"),
        default="packed",
        help="how sequences share a forward pass: packed on one axis without padding (default; padded "
        "where the model's attention cannot be packed) or padded to the widest",
    )
    p.add_argument(
        "--max-schema-bytes",
        type=int,
        default=256 * 1024,
        metavar="N",
        help="largest schema or grammar (default: 256 KiB)",
    )
    p.add_argument(
        "--compile-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="a structure that does not compile within this is refused with a 400 (default: 30)",
    )
    p.add_argument(
        "--trace",
        nargs="?",
        type=int,
        const=DEFAULT_TRACE_REQUESTS,
        metavar="N",
        help=f"record each request's trace and serve its page at /trace/{{request_id}}, keeping the last N "
        f"requests (default N: {DEFAULT_TRACE_REQUESTS}; see docs/trace.md)",
    )
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="keep compiled grammars in DIR (made if missing) across restarts: a restarted server answers "
        "a structure it compiled before from there (see docs/limits.md, 'The on-disk cache')",
    )
    p.add_argument(
        "--cache-dir-bytes",
        type=int,
        metavar="N",
        help=f"bound on the bytes --cache-dir holds, least recently used files removed first "
        f"(default: {DEFAULT_CACHE_DIR_BYTES} = 1 GiB)",
    )
    p.set_defaults(func=cmd_serve)


def _check_cache_dir(args: argparse.Namespace) -> None:
    """Refuses a --cache-dir the server could not use, before the model loads."""
    if args.cache_dir is None:
        if args.cache_dir_bytes is not None:
            raise ServeError("--cache-dir-bytes needs --cache-dir", code="usage")
        return
    if args.cache_dir_bytes is not None and args.cache_dir_bytes < 1:
        raise ServeError(f"--cache-dir-bytes N: N must be >= 1, got {args.cache_dir_bytes}", code="usage")
    path = Path(args.cache_dir)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ServeError(
            f"--cache-dir {args.cache_dir}: cannot be used as a directory: {e.strerror or e}", code="usage"
        ) from None
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise ServeError(f"--cache-dir {args.cache_dir}: the directory is not writable", code="usage")


def server_settings(args: argparse.Namespace, model_name: str) -> ServerSettings:
    """The server's settings from ``logitgate serve``'s flags."""
    from logitgate.server import ServerSettings

    return ServerSettings(
        model_name=model_name,
        max_batch=args.max_batch,
        packing=args.batching == "packed",
        max_schema_bytes=args.max_schema_bytes,
        compile_timeout_s=args.compile_timeout,
        trace_requests=args.trace or 0,
        cache_dir=args.cache_dir,
        cache_dir_bytes=DEFAULT_CACHE_DIR_BYTES if args.cache_dir_bytes is None else args.cache_dir_bytes,
    )


def cmd_serve(args: argparse.Namespace) -> int:
    if args.trace is not None and args.trace < 1:
        raise ServeError(f"--trace N: N must be >= 1, got {args.trace}", code="usage")
    if not args.compile_timeout > 0 or args.compile_timeout == float("inf"):
        raise ServeError(f"--compile-timeout: a positive number of seconds, got {args.compile_timeout}", code="usage")
    _check_cache_dir(args)
    try:
        import uvicorn

        from logitgate.server import create_app
    except ImportError as e:
        raise ServeError(f"the server extra is missing ({e.name}): pip install 'logitgate[server]'") from None
    import torch

    from logitgate.models import load_model

    name = args.model_name or (Path(args.model).stem if args.model else "smollm2-135m-instruct")
    t0 = time.perf_counter()
    try:
        model, tokenizer = load_model(args.model, dtype=getattr(torch, args.dtype))
    except (FileNotFoundError, OSError, ValueError) as e:
        raise ServeError(f"--model {args.model}: cannot load: {e}", code="model-load") from None
    app = create_app(model, tokenizer, server_settings(args, name))
    print(
        f"logitgate: serving {name!r} ({type(model).__name__}, loaded in {time.perf_counter() - t0:.1f} s) "
        f"at http://{args.host}:{args.port}/v1, batching {'packed' if app.state.logitgate.engine.packed else 'padded'}"
        + (f", compiled grammars kept in {args.cache_dir}" if args.cache_dir else ""),
        file=sys.stderr,
        flush=True,
    )
    # Streams of clients that went away must not hold a shutdown for long.
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=5)
    return 0
