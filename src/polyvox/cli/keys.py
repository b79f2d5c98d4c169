"""`polyvox keys create | list | revoke`: named API keys, written straight into the store the server
reads (the voices directory's `keys.json`, or Redis with `state_url`: the same settings as `serve`).
No server or admin key is needed, so the first admin key can be made this way; a running server sees
a change within a second."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime

from polyvox.cli.flags import add_settings_flags, settings_from_args

KEYS_SETTINGS = ("voices_dir", "state_url")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("keys", help="Named API keys: create, list, revoke.")
    actions = parser.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="Make a key; its secret is printed once.")
    create.add_argument("name", metavar="NAME", help="Its name (labels its usage and metrics).")
    create.add_argument(
        "--scopes", nargs="+", choices=("speech", "voices", "admin"), help="Default: speech voices."
    )
    create.add_argument("--rpm", type=int, help="Requests per minute.")
    create.add_argument("--chars-per-minute", type=int, help="Input characters per minute.")
    create.add_argument("--max-streams", type=int, help="Speech requests and WebSocket sessions at once.")
    create.add_argument("--json", action="store_true", help="Print the key as JSON.")
    create.set_defaults(func=run_create)
    listing = actions.add_parser("list", help="The keys (never their secrets).")
    listing.add_argument("--json", action="store_true", help="Print JSON.")
    listing.set_defaults(func=run_list)
    revoke = actions.add_parser("revoke", help="Revoke a key by its id.")
    revoke.add_argument("id", metavar="ID")
    revoke.set_defaults(func=run_revoke)
    for action in (create, listing, revoke):
        add_settings_flags(action, KEYS_SETTINGS)
    return parser


def _store(args: argparse.Namespace):
    from polyvox.server.tenancy.key_store import open_key_store

    return open_key_store(settings_from_args(args))


def run_create(args: argparse.Namespace) -> int:
    from polyvox.server.tenancy.keys import InvalidKeyRequest, KeyLimits, new_key

    limits = KeyLimits(args.rpm, args.chars_per_minute, args.max_streams)
    try:
        secret, key = new_key(args.name, tuple(args.scopes) if args.scopes else None, limits)
        _store(args).add(key)
    except InvalidKeyRequest as exc:
        print(f"polyvox keys create: {exc.message}", file=sys.stderr)
        return 2
    if args.json:
        shown = {k: v for k, v in key.to_json().items() if k not in ("digest", "last_used_at")}
        print(json.dumps({**shown, "key": secret}))
    else:
        print(f"{key.id}  {key.name}  {' '.join(key.scopes)}")
        print(f"key: {secret}  (shown once: keep it now)")
    return 0


def _when(stamp: int | None) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S") if stamp else "-"


def run_list(args: argparse.Namespace) -> int:
    keys = _store(args).all()
    if args.json:
        print(json.dumps([{k: v for k, v in key.to_json().items() if k != "digest"} for key in keys]))
        return 0
    for key in keys:
        limits = key.limits
        print(
            f"{key.id}  {key.name}  scopes={','.join(key.scopes)}  rpm={limits.requests_per_minute or '-'}  "
            f"chars/min={limits.characters_per_minute or '-'}  streams={limits.max_streams or '-'}  "
            f"created={_when(key.created_at)}  last used={_when(key.last_used_at)}"
        )
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    if not _store(args).remove(args.id):
        print(f"polyvox keys revoke: no key with id {args.id!r}", file=sys.stderr)
        return 1
    print(f"revoked {args.id}")
    return 0
