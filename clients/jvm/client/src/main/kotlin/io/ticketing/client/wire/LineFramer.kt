package io.ticketing.client.wire

/**
 * Cuts a byte stream into lines. Pure: bytes in, lines out.
 *
 * A line is reported without its `\n` and without one `\r` before it. A line
 * longer than 512 bytes is reported as too long as soon as that is certain,
 * i.e. when more than 513 bytes (room for the `\r`) have arrived without a `\n`.
 */
internal class LineFramer(private val maxLineBytes: Int = Wire.MAX_LINE_BYTES) {
    private val pending = ByteArray(maxLineBytes + 2)
    private var pendingLength = 0

    /** True while an unfinished line is buffered. */
    val hasPartialLine: Boolean get() = pendingLength > 0

    /**
     * Feeds [len] bytes of [chunk] from [off]; calls [onLine] with each complete line
     * (buffer, start, end). Stops early if [onLine] returns false.
     * @throws WireFormatException `toolong` when a line is longer than allowed
     */
    fun push(chunk: ByteArray, off: Int, len: Int, onLine: (ByteArray, Int, Int) -> Boolean): Boolean {
        var p = off
        val end = off + len
        while (p < end) {
            val b = chunk[p++]
            if (b == NL) {
                var lineEnd = pendingLength
                if (lineEnd > 0 && pending[lineEnd - 1] == CR) lineEnd--
                if (lineEnd > maxLineBytes) throw WireFormatException("toolong", "line longer than $maxLineBytes bytes")
                pendingLength = 0
                if (!onLine(pending, 0, lineEnd)) return false
            } else {
                if (pendingLength > maxLineBytes) throw WireFormatException("toolong", "line longer than $maxLineBytes bytes")
                pending[pendingLength++] = b
            }
        }
        return true
    }

    private companion object {
        const val NL = '\n'.code.toByte()
        const val CR = '\r'.code.toByte()
    }
}
