package io.ticketing.client.wire

import io.ticketing.client.TicketingException
import io.ticketing.client.internal.HostPort
import io.ticketing.client.internal.Timings
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.nio.charset.StandardCharsets
import kotlin.random.Random

class CodecTest {
    private fun frame(chunks: List<ByteArray>): List<String> {
        val framer = LineFramer()
        val out = ArrayList<String>()
        for (c in chunks) framer.push(c, 0, c.size) { b, s, e -> out.add(String(b, s, e - s, StandardCharsets.UTF_8)); true }
        return out
    }

    @Test
    fun `the framer gives the same lines whatever the chunking`() {
        val text = "H 1 node\r\nA 1 k\nT \u00e9t\u00e9\nP\n".toByteArray()
        val expected = listOf("H 1 node", "A 1 k", "T \u00e9t\u00e9", "P")
        for (cut in 0..text.size) {
            assertEquals(expected, frame(listOf(text.copyOfRange(0, cut), text.copyOfRange(cut, text.size))), "cut at $cut")
        }
        assertEquals(expected, frame(text.map { byteArrayOf(it) }))
    }

    @Test
    fun `the framer rejects a line over 512 bytes as soon as that is certain`() {
        val ok = ByteArray(512) { 'x'.code.toByte() } + "\r\n".toByteArray()
        assertEquals(1, frame(listOf(ok)).size)
        val long = ByteArray(513) { 'x'.code.toByte() } + "\n".toByteArray()
        assertEquals("toolong", assertThrows<WireFormatException> { frame(listOf(long)) }.code)
        // 514 bytes without a newline: no need to wait for one.
        assertEquals("toolong", assertThrows<WireFormatException> { frame(listOf(ByteArray(514) { 'x'.code.toByte() })) }.code)
        assertEquals(0, frame(listOf(ByteArray(513) { 'x'.code.toByte() })).size)
    }

    @Test
    fun `reply parsing never throws anything but WireFormatException on random bytes`() {
        val rnd = Random(42)
        repeat(20_000) {
            val bytes = ByteArray(rnd.nextInt(0, 40)) { (if (rnd.nextInt(4) == 0) " ATBRNPHME0123456789k-:".random(rnd).code else rnd.nextInt(256)).toByte() }
            try {
                Reply.parse(bytes)
            } catch (_: WireFormatException) {
                // fine: session-fatal for a client
            }
        }
    }

    @Test
    fun `keys - what may be sent`() {
        assertNull(Keys.problem("orders/42"))
        assertNull(Keys.problem("\uFEFFbom"))
        assertNull(Keys.problem("x".repeat(250)))
        assertNull(Keys.problem("\uD83D\uDD12"))
        for (bad in listOf("", " ", "a b", "\u0000", "\u007f", "x".repeat(251), "\uD83D", "\uDD12x")) assertNotNull(Keys.problem(bad), bad)
    }

    @Test
    fun `addresses - host, port, IPv6 in brackets, default port 5225`() {
        assertEquals(HostPort("127.0.0.1", 5225), HostPort.parse("127.0.0.1:5225"))
        assertEquals(HostPort("db.example", 5225), HostPort.parse("db.example"))
        assertEquals(HostPort("::1", 7000), HostPort.parse("[::1]:7000"))
        assertEquals(HostPort("::1", 5225), HostPort.parse("[::1]"))
        assertEquals("[::1]:7000", HostPort("::1", 7000).toString())
        for (bad in listOf("", ":5225", "h:0", "h:65536", "h:01", "::1", "[::1]x", "[]:1")) {
            assertThrows<TicketingException.InvalidArgument>(bad) { HostPort.parse(bad) }
        }
    }

    @Test
    fun `the default timings are the contract of CLIENT md`() {
        val t = Timings()
        assertEquals(3_000, t.reconnectMillis)
        assertEquals(5_000, t.pingIntervalMillis)
        assertEquals(5_000, t.pingTimeoutMillis)
        assertEquals(5_000, t.replyGraceMillis)
        assertEquals(5_000, t.releaseWindowMillis)
        assertEquals(200, t.releaseRetryMillis)
        assertEquals(100, t.earlyTimeoutMillis)
        assertEquals(5_000, t.closeWaitMillis)
        assertEquals(3, t.maxRedirects)
    }
}
