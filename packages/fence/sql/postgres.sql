-- @ticketing/fence: the high-water mark of fencing tokens, one row per lock key.
-- Tokens are unsigned 64-bit: NUMERIC(20,0) holds them exactly (BIGINT stops at 2^63-1).
CREATE TABLE IF NOT EXISTS ticketing_fence (
  key        TEXT PRIMARY KEY,
  token      NUMERIC(20, 0) NOT NULL CHECK (token BETWEEN 1 AND 18446744073709551615),
  updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
