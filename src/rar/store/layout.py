"""File names inside a store and a run directory (kept import-light for the CLI)."""

MANIFEST_NAME = "manifest.json"
EVENTS_NAME = "events.jsonl"
LOCK_NAME = "lock"
INDEX_NAME = "index.sqlite"
