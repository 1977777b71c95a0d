package io.ticketing.client.wire

import java.nio.charset.StandardCharsets

/**
 * Requests (client to server): format, and parse (used by the tests' fake
 * servers and the shared wire vectors). Pure: no I/O, no clock.
 */
internal sealed class Request {
    /** `H 1 [<client-token>]`. */
    data class Hello(val clientToken: String?) : Request()

    /** `A <key> <wait> <lease>`. */
    data class Acquire(val key: String, val waitSeconds: Int, val leaseSeconds: Int) : Request()

    /** `R <key> <token>`; [token] holds the bits of an unsigned 64-bit value. */
    data class Release(val key: String, val token: Long) : Request()

    /** `X <key> <token> <lease>`: extend exactly that grant; [token] holds the bits of an unsigned 64-bit value. */
    data class Extend(val key: String, val token: Long, val leaseSeconds: Int) : Request()

    object Ping : Request() {
        override fun toString() = "Ping"
    }

    /** The line without `\n`. The caller has validated the fields. */
    fun text(): String = when (this) {
        is Hello -> if (clientToken == null) "H 1" else "H 1 $clientToken"
        is Acquire -> "A $key $waitSeconds $leaseSeconds"
        is Release -> "R $key ${java.lang.Long.toUnsignedString(token)}"
        is Extend -> "X $key ${java.lang.Long.toUnsignedString(token)} $leaseSeconds"
        Ping -> "P"
    }

    /** The line as bytes, `\n` included. */
    fun encode(): ByteArray = (text() + "\n").toByteArray(StandardCharsets.UTF_8)

    companion object {
        fun parse(line: ByteArray): Request = parse(line, 0, line.size)

        /**
         * Parses one request line (without its `\n`).
         * @throws WireFormatException with the code a server answers with
         */
        fun parse(buf: ByteArray, start: Int, end: Int): Request {
            val f = Fields.split(buf, start, end)
                ?: throw WireFormatException(
                    "proto",
                    if (start == end) "empty line" else "fields must be separated by exactly one space",
                )
            return when {
                f.isChar(0, 'A') -> parseAcquire(f)
                f.isChar(0, 'R') -> parseRelease(f)
                f.isChar(0, 'X') -> parseExtend(f)
                f.isChar(0, 'P') -> if (f.count == 1) Ping else throw WireFormatException("proto", "expected 1 field")
                f.isChar(0, 'H') -> parseHello(f)
                else -> throw WireFormatException("proto", "unknown op")
            }
        }

        private fun parseAcquire(f: Fields): Request {
            if (f.count != 4) throw WireFormatException("proto", "expected 4 fields")
            val key = f.key(1) ?: throw WireFormatException("proto", "bad key")
            val wait = f.smallNumber(2, Wire.MAX_WAIT_SECONDS)
            if (wait == Fields.NUM_SYNTAX) throw WireFormatException("proto", "bad number for wait")
            if (wait == Fields.NUM_TOO_BIG) throw WireFormatException("range", "wait must be 0..255 seconds")
            return Acquire(key, wait, lease(f, 3))
        }

        private fun lease(f: Fields, i: Int): Int {
            val lease = f.smallNumber(i, Wire.MAX_LEASE_SECONDS)
            if (lease == Fields.NUM_SYNTAX) throw WireFormatException("proto", "bad number for lease")
            if (lease == Fields.NUM_TOO_BIG || lease < Wire.MIN_LEASE_SECONDS) {
                throw WireFormatException("range", "lease must be 1..250 seconds")
            }
            return lease
        }

        private fun parseExtend(f: Fields): Request {
            if (f.count != 4) throw WireFormatException("proto", "expected 4 fields")
            val key = f.key(1) ?: throw WireFormatException("proto", "bad key")
            val token = f.token(2)
            return Extend(key, token, lease(f, 3))
        }

        private fun parseRelease(f: Fields): Request {
            if (f.count != 3) throw WireFormatException("proto", "expected 3 fields")
            val key = f.key(1) ?: throw WireFormatException("proto", "bad key")
            return Release(key, f.token(2))
        }

        private fun parseHello(f: Fields): Request {
            if (f.count != 2 && f.count != 3) throw WireFormatException("proto", "expected 2 or 3 fields")
            val version = f.smallNumber(1, 1_000_000)
            if (version == Fields.NUM_SYNTAX) throw WireFormatException("proto", "bad number for protocol version")
            if (version != Wire.PROTOCOL_VERSION) throw WireFormatException("range", "unsupported protocol version")
            if (f.count == 2) return Hello(null)
            return Hello(f.word(2) ?: throw WireFormatException("proto", "bad client token"))
        }
    }
}
