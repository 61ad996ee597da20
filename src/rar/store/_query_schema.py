"""The tables of ``query.sqlite`` (see :mod:`rar.store.query`): their SQL and what each column
means. ``rar query --tables`` prints :data:`TABLES`; docs/scale.md lists the same columns (a test
checks that the two agree)."""

from __future__ import annotations

from typing import Final

SCHEMA_VERSION: Final = 1

TABLES: Final[dict[str, tuple[str, dict[str, str]]]] = {
    "runs": (
        "one row per run: its manifest, and how far its log was indexed",
        {
            "run_id": "the run's id",
            "status": "the manifest's status (incomplete: the manifest cannot be read)",
            "goal": "what the run is for (redacted)",
            "created_at": "when the run was created (UTC, ISO 8601)",
            "finished_at": "when it finished, or null",
            "parent": "the run it branched from, or null",
            "parent_seq": "the divergence point in the parent, or null",
            "head": "the manifest's head digest at finish, or null",
            "kind": "the run's kind tag (demo, ask, science, ...), or null",
            "mode": "config.mode, or null",
            "seed": "config.seed, or null",
            "model": "provider:model of the manifest's first model, or null",
            "tags": "the manifest's tags as a JSON object",
            "events": "lines of the log indexed (every line that passed its check)",
            "effects": "effect events indexed",
            "llm_calls": "stats.llm.calls of the manifest (model calls, cached ones too)",
            "input_tokens": "stats.llm.input_tokens of the manifest",
            "output_tokens": "stats.llm.output_tokens of the manifest",
            "cost": "stats.llm.cost of the manifest (USD, from the models' profiles)",
            "wall_time_us": "stats.wall_time_us of the manifest",
            "problem": "why indexing stopped before the log's end, or null",
        },
    ),
    "events": (
        "one row per line of every log that passed its check (seq, chain)",
        {
            "run_id": "the run",
            "seq": "1-based position in the log",
            "ts": "when the event was written (UTC)",
            "type": "the event type (effect, message, span.start, ...)",
            "span": "the span path",
            "agent": "the agent that caused it, or null",
            "kind": "for effects: llm, tool, clock, random, uuid, ...; else null",
            "digest": "digest of the line's bytes (the next line's prev)",
            "prev": "digest of the previous line, null for seq 1",
            "bytes": "length of the line in bytes",
            "data": "the line itself (canonical JSON: query it with json_extract)",
        },
    ),
    "effects": (
        "one row per effect event",
        {
            "run_id": "the run",
            "seq": "the event's seq",
            "span": "the span path",
            "ordinal": "0-based index of the effect within its span",
            "kind": "llm, tool, clock, random, uuid, sleep, wait, config, http, ...",
            "name": "llm: the model asked for; tool: the tool's name; else the op, or null",
            "provider": "llm: the provider; else null",
            "version": "tool: the tool's version; else null",
            "request_digest": "digest of the request payload",
            "request_size": "bytes of the request's canonical (linked) form",
            "result_digest": "digest of the result payload, null when the effect failed",
            "result_size": "bytes of the result's canonical form, or null",
            "status": "ok, or error when the effect raised (a tool returning ok=false: failed)",
            "error_type": "the exception's class name, or null",
            "error_message": "its message (redacted), or null",
            "duration_us": "wall time of the effect in microseconds",
            "cached": "llm: 1 when the answer came from the response cache, else 0; else null",
        },
    ),
    "usage": (
        "one row per llm effect with a recorded answer: the tokens it reported",
        {
            "run_id": "the run",
            "seq": "the effect's seq",
            "span": "the span path",
            "provider": "the provider that answered (served_by), else the one asked",
            "model": "the model that answered (the response's model), else the one asked",
            "input_tokens": "prompt tokens",
            "cached_input_tokens": "prompt tokens read from the provider's cache",
            "cache_write_input_tokens": "prompt tokens written to the provider's cache",
            "output_tokens": "completion tokens",
            "reasoning_tokens": "reasoning tokens (part of the output)",
            "total_tokens": "input_tokens + output_tokens",
            "cached": "1 when RAR's response cache served the answer (no cost), else 0",
            "finish_reason": "why the model stopped, or null",
        },
    ),
    "anchors": (
        "evidence anchors: every anchor of an evidence event, and every claim x anchor of the "
        "final answer",
        {
            "run_id": "the run",
            "seq": "the evidence or run.finished event",
            "source": "evidence (found by a researcher) or answer (cited by a claim)",
            "claim_index": "answer: 0-based index of the claim; else null",
            "claim": "answer: the claim's text; else null",
            "ref": "doc_id#location",
            "doc_id": "the document",
            "location": "the passage's location in it (e.g. paragraph_3)",
            "doc_title": "the document's title, or null",
            "content_hash": "digest of the passage text when cited (checked by rar verify)",
            "relevance_score": "the hit's normalised score in [0, 1], or null",
            "snippet": "the passage text as cited (at most 300 characters)",
        },
    ),
    "messages": (
        "recorded message text (searched by rar search): each distinct message of a run once, "
        "where it first appears",
        {
            "id": "row id (the full-text index's rowid)",
            "run_id": "the run",
            "seq": "the event it first appears in",
            "span": "the span path of that event",
            "source": "request (a model call's conversation), response (a model's answer) or "
            "acl (a message between agents)",
            "role": "system, user, assistant or tool; for acl: the performative (INFORM, CFP, ...)",
            "name": "tool: the tool's name; acl: the sender; else null",
            "position": "index in the request's messages; 0 for a response or acl message",
            "text": "the text: content, tool calls as name(arguments), reasoning; acl: the "
            "content's strings",
        },
    ),
}

SCHEMA: Final = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sources (
    run_id TEXT PRIMARY KEY,
    log_key TEXT NOT NULL,
    manifest_key TEXT NOT NULL,
    indexed_bytes INTEGER NOT NULL,
    prefix_sha256 TEXT NOT NULL,
    last_digest TEXT,
    lines INTEGER NOT NULL,
    complete INTEGER NOT NULL
);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, status TEXT NOT NULL, goal TEXT, created_at TEXT, finished_at TEXT,
    parent TEXT, parent_seq INTEGER, head TEXT, kind TEXT, mode TEXT, seed INTEGER, model TEXT,
    tags TEXT, events INTEGER NOT NULL, effects INTEGER NOT NULL, llm_calls INTEGER,
    input_tokens INTEGER, output_tokens INTEGER, cost REAL, wall_time_us INTEGER, problem TEXT
);
CREATE TABLE events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, ts TEXT, type TEXT NOT NULL, span TEXT,
    agent TEXT, kind TEXT, digest TEXT NOT NULL, prev TEXT, bytes INTEGER NOT NULL,
    data TEXT NOT NULL, PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX events_type ON events (type, kind);
CREATE TABLE effects (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, span TEXT, ordinal INTEGER, kind TEXT,
    name TEXT, provider TEXT, version TEXT, request_digest TEXT, request_size INTEGER,
    result_digest TEXT, result_size INTEGER, status TEXT NOT NULL, error_type TEXT,
    error_message TEXT, duration_us INTEGER, cached INTEGER, PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX effects_kind ON effects (kind, name);
CREATE TABLE usage (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, span TEXT, provider TEXT, model TEXT,
    input_tokens INTEGER, cached_input_tokens INTEGER, cache_write_input_tokens INTEGER,
    output_tokens INTEGER, reasoning_tokens INTEGER, total_tokens INTEGER, cached INTEGER,
    finish_reason TEXT, PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE anchors (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, source TEXT NOT NULL, claim_index INTEGER,
    claim TEXT, ref TEXT, doc_id TEXT, location TEXT, doc_title TEXT, content_hash TEXT,
    relevance_score REAL, snippet TEXT
);
CREATE INDEX anchors_run ON anchors (run_id, seq);
CREATE INDEX anchors_hash ON anchors (content_hash);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, seq INTEGER NOT NULL, span TEXT,
    source TEXT NOT NULL, role TEXT, name TEXT, position INTEGER, text TEXT NOT NULL
);
CREATE INDEX messages_run ON messages (run_id, seq);
CREATE VIRTUAL TABLE messages_fts USING fts5(
    text, content='messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER messages_removed AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
"""

ROW_TABLES: Final = ("events", "effects", "usage", "anchors", "messages")
"""Tables with rows per event, deleted when a run is indexed again from its start."""


def columns(table: str) -> tuple[str, ...]:
    return tuple(TABLES[table][1])
