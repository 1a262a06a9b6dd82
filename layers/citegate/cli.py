"""The `citegate` command. Today: `citegate serve`; the CLI issue adds the client commands."""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="citegate", description="Governed, cited knowledge answering.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the local stack and gateway on one machine")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: $PORT or 8099")
    args = parser.parse_args(argv)
    if args.command == "serve":
        from citegate.local.serve import serve as run_serve

        return run_serve(args.host, args.port)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
