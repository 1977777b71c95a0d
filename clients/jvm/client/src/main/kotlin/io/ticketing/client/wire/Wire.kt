package io.ticketing.client.wire

/** Numbers fixed by PROTOCOL.md (version 1). */
internal object Wire {
    const val PROTOCOL_VERSION = 1
    const val DEFAULT_PORT = 5225

    /** Longest line in bytes, not counting its `\n` and an optional `\r` before it. */
    const val MAX_LINE_BYTES = 512
    const val MAX_KEY_BYTES = 250
    const val MAX_WAIT_SECONDS = 255
    const val MIN_LEASE_SECONDS = 1
    const val MAX_LEASE_SECONDS = 250
}

/**
 * Why a line could not be parsed. [code] is what a server would put in its
 * `E` reply (`proto`, `range`, `toolong`); for a reply, any code means the
 * client must treat the line as session-fatal.
 */
internal class WireFormatException(val code: String, message: String) : Exception(message, null, false, false)
