package io.ticketing.client.wire

import java.nio.charset.StandardCharsets

/**
 * Replies (server to client): parse, and format (used by the tests' fake
 * servers and the shared wire vectors). Pure: no I/O, no clock.
 */
internal sealed class Reply {
    /** `H 1 <node-name>`: hello accepted. */
    data class Hello(val nodeName: String) : Reply()

    /** `A <token> <key>`: granted; [token] holds the bits of an unsigned 64-bit value. */
    data class Granted(val token: Long, val key: String) : Reply()

    /** `T <key>`: the wait ran out, nothing is held. */
    data class TimedOut(val key: String) : Reply()

    /** `B <key>`: capacity rejection, definite. */
    data class Busy(val key: String) : Reply()

    /** `R <key>`: released. */
    data class Released(val key: String) : Reply()

    /** `N <key>`: not released (not held, or held under another token). */
    data class NotHeld(val key: String) : Reply()

    /** `X <key>`: extended, the token is still the current grant with the new lease. */
    data class Extended(val key: String) : Reply()

    /** `G <key>`: not extended, the grant is gone (expired, released, or another identity's). */
    data class Gone(val key: String) : Reply()

    object Pong : Reply() {
        override fun toString() = "Pong"
    }

    /** `M <host:port>`, or `M -` ([address] null) when no active node is known. */
    data class Redirect(val address: String?) : Reply()

    /** `E <code> <text>`: session-fatal error. */
    data class Error(val code: String, val text: String) : Reply()

    /** The line without `\n`. */
    fun text(): String = when (this) {
        is Hello -> "H 1 $nodeName"
        is Granted -> "A ${java.lang.Long.toUnsignedString(token)} $key"
        is TimedOut -> "T $key"
        is Busy -> "B $key"
        is Released -> "R $key"
        is NotHeld -> "N $key"
        is Extended -> "X $key"
        is Gone -> "G $key"
        Pong -> "P"
        is Redirect -> "M ${address ?: "-"}"
        is Error -> if (text.isEmpty()) "E $code" else "E $code $text"
    }

    fun encode(): ByteArray = (text() + "\n").toByteArray(StandardCharsets.UTF_8)

    companion object {
        private val ERROR_CODE = Regex("[a-z]+")
        private val PORT = Regex("[1-9][0-9]{0,4}")

        fun parse(line: ByteArray): Reply = parse(line, 0, line.size)

        /**
         * Parses one reply line (without `\n` / `\r\n`). Anything that is not a
         * well-formed reply of PROTOCOL.md throws: the client treats it as
         * session-fatal.
         * @throws WireFormatException code `toolong` for a line over 512 bytes, `proto` otherwise
         */
        fun parse(buf: ByteArray, start: Int, end: Int): Reply {
            if (end - start > Wire.MAX_LINE_BYTES) throw WireFormatException("toolong", "reply longer than 512 bytes")
            // E's text is free-form, so it is split by hand before the strict field rules apply.
            if (end - start >= 1 && buf[start] == 'E'.code.toByte() && (end - start == 1 || buf[start + 1] == 0x20.toByte())) {
                return parseError(buf, start, end)
            }
            val f = Fields.split(buf, start, end) ?: throw malformed("bad spacing")
            if (f.count == 2 && f.length(0) == 1) {
                val key = { f.key(1) ?: throw malformed("bad key") }
                when (buf[f.start(0)].toInt().toChar()) {
                    'T' -> return TimedOut(key())
                    'B' -> return Busy(key())
                    'R' -> return Released(key())
                    'N' -> return NotHeld(key())
                    'X' -> return Extended(key())
                    'G' -> return Gone(key())
                    'M' -> return parseRedirect(f)
                }
            }
            if (f.count == 3 && f.isChar(0, 'A')) {
                val token = try {
                    f.token(1)
                } catch (_: WireFormatException) {
                    throw malformed("bad token")
                }
                return Granted(token, f.key(2) ?: throw malformed("bad key"))
            }
            if (f.count == 1 && f.isChar(0, 'P')) return Pong
            if (f.count == 3 && f.isChar(0, 'H')) {
                if (f.smallNumber(1, 1) != Wire.PROTOCOL_VERSION) throw malformed("bad protocol version")
                return Hello(f.word(2) ?: throw malformed("bad node name"))
            }
            throw malformed("unknown reply")
        }

        private fun malformed(why: String) = WireFormatException("proto", "malformed reply: $why")

        private fun parseRedirect(f: Fields): Reply {
            val address = f.word(1) ?: throw malformed("bad address")
            if (address == "-") return Redirect(null)
            if (!isHostPort(address)) throw malformed("bad address")
            return Redirect(address)
        }

        private fun parseError(buf: ByteArray, start: Int, end: Int): Reply {
            var codeEnd = start + 2
            while (codeEnd < end && buf[codeEnd] != 0x20.toByte()) codeEnd++
            if (codeEnd <= start + 2) throw malformed("E without a code")
            val code = String(buf, start + 2, codeEnd - start - 2, StandardCharsets.ISO_8859_1)
            if (!ERROR_CODE.matches(code)) throw malformed("bad error code")
            val text = if (codeEnd < end) String(buf, codeEnd + 1, end - codeEnd - 1, StandardCharsets.UTF_8) else ""
            return Error(code, text)
        }

        /** `host:port` with a port 1..65535; IPv6 hosts in brackets. */
        fun isHostPort(address: String): Boolean {
            val colon = address.lastIndexOf(':')
            if (colon <= 0) return false
            val port = address.substring(colon + 1)
            if (!PORT.matches(port) || port.toInt() > 65535) return false
            val host = address.substring(0, colon)
            if (host.startsWith("[")) return host.endsWith("]") && host.length > 2
            return !host.contains(':')
        }
    }
}
