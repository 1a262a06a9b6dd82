"""The `citegate` command: `serve` and `demo` today; the CLI issue adds the client commands."""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="citegate", description="Governed, cited knowledge answering.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the local stack and gateway on one machine")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: $PORT or 8099")
    demo = commands.add_parser("demo", help="start the local stack, ingest the samples, ask two questions")
    demo.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    if args.command == "serve":
        from citegate.local.serve import serve as run_serve

        return run_serve(args.host, args.port)
    if args.command == "demo":
        from citegate.demo import run_demo

        return run_demo(args.port)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
