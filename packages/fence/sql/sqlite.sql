-- @ticketing/fence: the high-water mark of fencing tokens, one row per lock key.
-- Tokens are unsigned 64-bit, stored as 20-digit zero-padded text so that text
-- order is numeric order (SQLite integers stop at 2^63-1).
CREATE TABLE IF NOT EXISTS ticketing_fence (
  key        TEXT PRIMARY KEY,
  token      TEXT NOT NULL CHECK (length(token) = 20 AND token NOT GLOB '*[^0-9]*'),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
