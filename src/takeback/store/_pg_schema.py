"""Store layer: the PostgreSQL store's tables, and the migrations that make and upgrade them.

Everything lives in the schema ``takeback``. Several workspaces share one database: each
has a row in ``workspaces`` (its key, by default its root path), and every other row
names its workspace by that row's id (``ws``). Objects too are a workspace's own (a
history can be copied, pruned or dropped alone); they are still written once each, by
content hash, within it.

The schema's version is one row in ``takeback.version``. Opening a database that lacks
the schema (or has an older one) runs the missing migrations in one transaction, under a
transaction-level advisory lock, so two servers that start at once make it once. A
database whose version is newer than this takeback knows is refused.
"""

from __future__ import annotations

#: the schema version this takeback writes (the length of ``MIGRATIONS``)
PG_SCHEMA_VERSION = 4

#: advisory lock keys (the first int of the two-int form; the second is the workspace)
LOCK_WORKSPACE = 0x7462_0001  # session-held: shared for snapshots, exclusive for restores
LOCK_WRITE = 0x7462_0002  # transaction-held: one writer of a workspace's rows at a time
LOCK_SCHEMA = 0x7462_0003  # transaction-held: one migration at a time
LOCK_GC = 0x7462_0004  # session-held: one gc of a workspace at a time

#: the LISTEN/NOTIFY channel events are announced on
EVENTS_CHANNEL = "takeback_events"

_V1 = """
CREATE SCHEMA IF NOT EXISTS takeback;
CREATE TABLE takeback.version(
    one INTEGER PRIMARY KEY DEFAULT 1 CHECK (one = 1),
    version INTEGER NOT NULL
);
CREATE TABLE takeback.workspaces(
    id SERIAL PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    root TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE takeback.objects(
    ws INTEGER NOT NULL REFERENCES takeback.workspaces(id),
    oid TEXT NOT NULL,
    kind TEXT NOT NULL,
    size BIGINT NOT NULL,
    data BYTEA NOT NULL,
    base TEXT,
    depth INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (ws, oid)
);
CREATE TABLE takeback.meta(
    ws INTEGER NOT NULL REFERENCES takeback.workspaces(id),
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (ws, key)
);
CREATE TABLE takeback.snapshots(
    seq BIGSERIAL PRIMARY KEY,
    ws INTEGER NOT NULL REFERENCES takeback.workspaces(id),
    id TEXT NOT NULL,
    tree TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    kind TEXT NOT NULL,
    session TEXT,
    turn BIGINT,
    step BIGINT,
    message TEXT NOT NULL DEFAULT '',
    files BIGINT NOT NULL,
    skipped TEXT NOT NULL DEFAULT '[]',
    skipped_count BIGINT NOT NULL DEFAULT 0,
    duration_ms BIGINT NOT NULL DEFAULT 0,
    unreadable TEXT NOT NULL DEFAULT '[]',
    unreadable_count BIGINT NOT NULL DEFAULT 0,
    UNIQUE (ws, id)
);
CREATE INDEX snapshots_session ON takeback.snapshots(ws, session, seq);
CREATE TABLE takeback.sessions(
    ws INTEGER NOT NULL,
    name TEXT NOT NULL,
    baseline TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (ws, name),
    FOREIGN KEY (ws, baseline) REFERENCES takeback.snapshots(ws, id)
);
CREATE TABLE takeback.steps(
    ws INTEGER NOT NULL,
    session TEXT NOT NULL,
    n BIGINT NOT NULL,
    turn BIGINT,
    before TEXT,
    after TEXT,
    label TEXT NOT NULL DEFAULT '',
    exit_code INTEGER,
    command INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (ws, session, n),
    FOREIGN KEY (ws, session) REFERENCES takeback.sessions(ws, name),
    FOREIGN KEY (ws, before) REFERENCES takeback.snapshots(ws, id),
    FOREIGN KEY (ws, after) REFERENCES takeback.snapshots(ws, id)
);
CREATE TABLE takeback.turns(
    seq BIGSERIAL UNIQUE,
    ws INTEGER NOT NULL,
    session TEXT NOT NULL,
    n BIGINT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    before TEXT,
    after TEXT,
    state TEXT NOT NULL,
    begun_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    PRIMARY KEY (ws, session, n),
    FOREIGN KEY (ws, session) REFERENCES takeback.sessions(ws, name),
    FOREIGN KEY (ws, before) REFERENCES takeback.snapshots(ws, id),
    FOREIGN KEY (ws, after) REFERENCES takeback.snapshots(ws, id)
);
CREATE TABLE takeback.touches(
    ws INTEGER NOT NULL REFERENCES takeback.workspaces(id),
    session TEXT NOT NULL,
    turn BIGINT NOT NULL,
    path BYTEA NOT NULL,
    state TEXT,
    tool_call_id TEXT,
    at DOUBLE PRECISION NOT NULL DEFAULT 0,
    PRIMARY KEY (ws, session, turn, path)
);
CREATE TABLE takeback.changes(
    ws INTEGER NOT NULL REFERENCES takeback.workspaces(id),
    session TEXT NOT NULL,
    turn BIGINT NOT NULL,
    path BYTEA NOT NULL,
    status TEXT NOT NULL,
    added BIGINT NOT NULL,
    removed BIGINT NOT NULL,
    before TEXT,
    after TEXT,
    sha256 TEXT,
    undoable INTEGER NOT NULL,
    approximate INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (ws, session, turn, path)
);
CREATE TABLE takeback.ops(
    id BIGSERIAL PRIMARY KEY,
    ws INTEGER NOT NULL,
    session TEXT NOT NULL,
    kind TEXT NOT NULL,
    turns TEXT NOT NULL,
    pre TEXT,
    data TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    FOREIGN KEY (ws, pre) REFERENCES takeback.snapshots(ws, id)
);
CREATE INDEX ops_session ON takeback.ops(ws, session, id);
CREATE TABLE takeback.journals(
    ws INTEGER PRIMARY KEY REFERENCES takeback.workspaces(id),
    data TEXT NOT NULL,
    written_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE takeback.events(
    id BIGSERIAL PRIMARY KEY,
    ws INTEGER NOT NULL REFERENCES takeback.workspaces(id),
    at DOUBLE PRECISION NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX events_ws ON takeback.events(ws, id);
"""

# Version 2: gc deletes snapshot rows, and the database then checks every foreign key
# that could name each one; without an index on the naming columns each check reads all
# of the workspace's turns, steps or ops (a gc removing n snapshots of a history of m
# rows took n x m).
_V2 = """
CREATE INDEX steps_before ON takeback.steps(ws, before);
CREATE INDEX steps_after ON takeback.steps(ws, after);
CREATE INDEX turns_before ON takeback.turns(ws, before);
CREATE INDEX turns_after ON takeback.turns(ws, after);
CREATE INDEX ops_pre ON takeback.ops(ws, pre);
CREATE INDEX sessions_baseline ON takeback.sessions(ws, baseline);
"""

# Version 3: turns and ops take numbers from the snapshots' sequence, so that snapshots,
# turns and ops have one order whatever the clock says ("newest", "ended last", gc's
# newest turns); touches and changes say whether a step whose end was never seen
# brought them (``unconfirmed``). Rows from before are given the number of the snapshot
# taken just before them (their own, or the newest by time), the best order known.
_V3 = """
ALTER TABLE takeback.turns ADD COLUMN begun_seq BIGINT;
ALTER TABLE takeback.turns ADD COLUMN ended_seq BIGINT;
ALTER TABLE takeback.ops ADD COLUMN seq BIGINT;
ALTER TABLE takeback.touches ADD COLUMN unconfirmed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE takeback.changes ADD COLUMN unconfirmed INTEGER NOT NULL DEFAULT 0;
UPDATE takeback.turns t SET begun_seq = COALESCE(
    (SELECT s.seq FROM takeback.snapshots s WHERE s.ws = t.ws AND s.id = t.before),
    (SELECT MAX(s.seq) FROM takeback.snapshots s
     WHERE s.ws = t.ws AND s.created_at <= t.begun_at),
    0);
UPDATE takeback.turns t SET ended_seq = COALESCE(
    (SELECT MAX(s.seq) FROM takeback.snapshots s
     WHERE s.ws = t.ws AND s.created_at <= t.ended_at),
    0) WHERE t.ended_at IS NOT NULL;
UPDATE takeback.ops o SET seq = COALESCE(
    (SELECT s.seq FROM takeback.snapshots s WHERE s.ws = o.ws AND s.id = o.pre),
    (SELECT MAX(s.seq) FROM takeback.snapshots s
     WHERE s.ws = o.ws AND s.created_at <= o.created_at),
    0);
"""

# Version 4: objects are numbered in the order they are stored, so that gc finds what was
# stored while it ran even when nothing names it yet (a scan that died after storing its
# objects), and keeps its delta bases. Rows from before have none: they were all stored
# before any gc that reads the numbers began. Adding a column without a value rewrites
# nothing; the index serves gc's one range query.
_V4 = """
CREATE SEQUENCE takeback.objects_seq;
ALTER TABLE takeback.objects ADD COLUMN seq BIGINT;
ALTER TABLE takeback.objects ALTER COLUMN seq SET DEFAULT nextval('takeback.objects_seq');
ALTER SEQUENCE takeback.objects_seq OWNED BY takeback.objects.seq;
CREATE INDEX objects_stored ON takeback.objects(ws, seq);
"""

#: MIGRATIONS[i] brings a database from version i to i + 1 (0: no schema at all). A new
#: version appends its statements here; an old one is never edited.
MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4)
