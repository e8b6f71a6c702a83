#!/usr/bin/env python3
"""A real gRPC server that misbehaves as a JAX profiler, for `stepscope capture` tests.

It serves `/tensorflow.ProfilerService/Profile` with grpcio's generic handler and raw
bytes in and out (no generated code), so each answer is exactly the bytes a mode
chooses. Every other method (stepscope's connection probe included) gets the UNIMPLEMENTED
that any gRPC server gives. It listens on 127.0.0.1 (a free port unless --port is
given), prints the port alone on the first line of stdout (flushed), and serves until
killed or --seconds have passed.

Modes (--mode):
    huge        a valid ProfileResponse whose xspace field is --mib MiB of seeded random junk
    garbage     answer bytes that are not a ProfileResponse protobuf at all
    bad-xspace  a valid ProfileResponse whose xspace is --xspace FILE cut to its first half
    stall       accepts the Profile call and never answers (until the caller gives up)
    error       a gRPC error status whose message is --mib MiB (default 1) of text with
                newlines and control characters
    empty       a ProfileResponse with empty_trace set (and no xspace), as an idle job answers
    no-xspace   an empty ProfileResponse: no empty_trace, no xspace

Examples:
    python3 tests/support/hostile_profiler.py --mode huge --mib 48
    python3 tests/support/hostile_profiler.py --mode bad-xspace --xspace tests/fixtures/.../vm.xplane.pb
    stepscope capture 127.0.0.1:PORT --duration 1s
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from concurrent import futures

import grpc

PROFILE = "/tensorflow.ProfilerService/Profile"
MODES = ["huge", "garbage", "bad-xspace", "stall", "error", "empty", "no-xspace"]
MIB = 1 << 20


def varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_bytes(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def field_bool(number: int, value: bool) -> bytes:
    """A varint protobuf field (wire type 0) holding a bool."""
    return varint(number << 3) + varint(int(value))


# ProfileResponse (tensorflow/tsl profiler_service.proto, see /work/shared/formats.md):
# 6 tool_data : rep message · 7 empty_trace : bool · 8 xspace : XSpace.
EMPTY_TRACE, XSPACE = 7, 8


def answer_for(args) -> bytes | None:
    """The serialized answer for a mode; None for modes that answer no message."""
    if args.mode == "huge":
        junk = random.Random(10).randbytes(int(args.mib * MIB))
        return field_bytes(XSPACE, junk)
    if args.mode == "garbage":
        # Field 8 announced as length-delimited with a length far past the end, then
        # a wire type 7 key: no protobuf parser can read this.
        return b"\x42\xff\xff\xff\x7f" + b"\x0f" * 64
    if args.mode == "bad-xspace":
        if not args.xspace:
            sys.exit("--mode bad-xspace needs --xspace FILE")
        with open(args.xspace, "rb") as f:
            whole = f.read()
        return field_bytes(XSPACE, whole[: len(whole) // 2])
    if args.mode == "empty":
        return field_bool(EMPTY_TRACE, True)
    if args.mode == "no-xspace":
        return b""
    return None


def error_message(mib: float) -> str:
    """A long status message full of line breaks and control characters."""
    line = "profiler failed:\r\n\tstack frame \x1b[31m#%d\x1b[0m at 0xdeadbeef\x00\x07 end\n"
    parts, size, i = [], 0, 0
    while size < mib * MIB:
        s = line % i
        parts.append(s)
        size += len(s)
        i += 1
    return "".join(parts)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=MODES, required=True)
    p.add_argument("--mib", type=float, default=None, help="size for huge (default 48) and error (default 1), MiB")
    p.add_argument("--xspace", help="the XSpace file bad-xspace cuts in half")
    p.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    p.add_argument("--seconds", type=float, default=120.0, help="serve this long, then exit (default 120)")
    args = p.parse_args(argv)
    if args.mib is None:
        args.mib = 48.0 if args.mode == "huge" else 1.0

    answer = answer_for(args)
    message = error_message(args.mib) if args.mode == "error" else ""
    stop = threading.Event()

    def profile(request: bytes, context: grpc.ServicerContext) -> bytes:
        if args.mode == "stall":
            # Hold the call open without answering until the caller goes away.
            while context.is_active() and not stop.is_set():
                time.sleep(0.05)
            return b""
        if args.mode == "error":
            context.abort(grpc.StatusCode.INTERNAL, message)
        return answer

    identity = lambda b: b  # noqa: E731 (raw bytes both ways)
    handler = grpc.method_handlers_generic_handler(
        "tensorflow.ProfilerService",
        {"Profile": grpc.unary_unary_rpc_method_handler(
            profile, request_deserializer=identity, response_serializer=identity)},
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        handlers=[handler],
        options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", 64 * MIB)],
    )
    port = server.add_insecure_port(f"127.0.0.1:{args.port}")
    if port == 0:
        sys.exit(f"cannot listen on 127.0.0.1:{args.port}")
    server.start()
    print(port, flush=True)
    try:
        server.wait_for_termination(timeout=args.seconds)
    finally:
        stop.set()
        server.stop(grace=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
