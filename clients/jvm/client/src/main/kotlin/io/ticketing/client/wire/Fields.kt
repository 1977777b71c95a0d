package io.ticketing.client.wire

import java.nio.ByteBuffer
import java.nio.charset.CharacterCodingException
import java.nio.charset.CodingErrorAction
import java.nio.charset.StandardCharsets

/**
 * One line split on single spaces (0x20), as PROTOCOL.md requires: an empty
 * line or a leading, trailing or double space is not a line of fields
 * ([split] returns null). Only the first [MAX_FIELDS] fields are kept; [count]
 * is the real number, so "too many fields" is still seen.
 */
internal class Fields private constructor(private val buf: ByteArray, private val bounds: IntArray, val count: Int) {

    fun start(i: Int): Int = bounds[2 * i]
    fun end(i: Int): Int = bounds[2 * i + 1]
    fun length(i: Int): Int = end(i) - start(i)

    /** True if field [i] is exactly the one ASCII character [ch]. */
    fun isChar(i: Int, ch: Char): Boolean = length(i) == 1 && buf[start(i)] == ch.code.toByte()

    /** Field [i] as a key (1..250 bytes of UTF-8, no byte below 0x21, no 0x7F), or null. */
    fun key(i: Int): String? = if (length(i) > Wire.MAX_KEY_BYTES) null else word(i)

    /** Like [key] without the length limit (client tokens, node names, addresses). */
    fun word(i: Int): String? {
        for (p in start(i) until end(i)) {
            val b = buf[p].toInt() and 0xff
            if (b < 0x21 || b == 0x7f) return null
        }
        return decodeUtf8Strict(buf, start(i), length(i))
    }

    /**
     * Field [i] as a small unsigned decimal (no sign, no leading zero): its
     * value, [NUM_SYNTAX], or [NUM_TOO_BIG] when it is well formed but above [max].
     */
    fun smallNumber(i: Int, max: Int): Int {
        val s = start(i)
        val e = end(i)
        var value = 0L
        for (p in s until e) {
            val d = buf[p] - ZERO
            if (d < 0 || d > 9) return NUM_SYNTAX
            if (d == 0 && p == s && e - s > 1) return NUM_SYNTAX
            if (value <= max) value = value * 10 + d
        }
        return if (value > max) NUM_TOO_BIG else value.toInt()
    }

    /**
     * Field [i] as a token 1..2^64-1, returned as the bits of an unsigned long.
     * @throws WireFormatException `proto` for bad syntax, `range` for 0 or above 2^64-1
     */
    fun token(i: Int): Long {
        val s = start(i)
        val e = end(i)
        for (p in s until e) {
            val d = buf[p] - ZERO
            if (d < 0 || d > 9) throw WireFormatException("proto", "bad number for token")
        }
        if (buf[s] == ZERO) {
            if (e - s == 1) throw WireFormatException("range", "token must be 1..18446744073709551615")
            throw WireFormatException("proto", "bad number for token")
        }
        if (e - s <= 20) {
            try {
                return java.lang.Long.parseUnsignedLong(String(buf, s, e - s, StandardCharsets.ISO_8859_1))
            } catch (_: NumberFormatException) {
                // above 2^64-1: falls through
            }
        }
        throw WireFormatException("range", "token must be 1..18446744073709551615")
    }

    companion object {
        const val NUM_SYNTAX = -1
        const val NUM_TOO_BIG = -2
        const val MAX_FIELDS = 8
        private const val SPACE = 0x20.toByte()
        private const val ZERO = '0'.code.toByte()

        fun split(buf: ByteArray, start: Int, end: Int): Fields? {
            if (start >= end) return null
            val bounds = IntArray(2 * MAX_FIELDS)
            var count = 0
            var fieldStart = start
            for (i in start..end) {
                if (i == end || buf[i] == SPACE) {
                    if (i == fieldStart) return null
                    if (count < MAX_FIELDS) {
                        bounds[2 * count] = fieldStart
                        bounds[2 * count + 1] = i
                    }
                    count++
                    fieldStart = i + 1
                }
            }
            return Fields(buf, bounds, count)
        }

        /** Strict UTF-8 decoding: null for malformed input (overlong forms and surrogates included). */
        fun decodeUtf8Strict(buf: ByteArray, off: Int, len: Int): String? {
            var ascii = true
            for (p in off until off + len) if (buf[p] < 0) { ascii = false; break }
            if (ascii) return String(buf, off, len, StandardCharsets.ISO_8859_1)
            return try {
                StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(buf, off, len))
                    .toString()
            } catch (_: CharacterCodingException) {
                null
            }
        }
    }
}
