package io.ticketing.client.support

import java.io.ByteArrayOutputStream
import java.io.IOException
import java.io.InputStream
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import java.net.SocketTimeoutException
import java.nio.charset.StandardCharsets
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit
import javax.net.ServerSocketFactory

/**
 * A scripted server for fault tests: the test accepts each connection and
 * reads and writes raw protocol lines itself (garbage included).
 */
class FakeServer(factory: ServerSocketFactory = ServerSocketFactory.getDefault()) : AutoCloseable {
    private val server: ServerSocket = factory.createServerSocket(0, 50, InetAddress.getLoopbackAddress())
    private val accepted = LinkedBlockingQueue<FakeConn>()
    private val all = java.util.concurrent.CopyOnWriteArrayList<FakeConn>()
    val port: Int get() = server.localPort
    val address: String get() = "127.0.0.1:$port"

    init {
        Thread({
            while (!server.isClosed) {
                try {
                    val s = server.accept()
                    val c = FakeConn(s)
                    all.add(c)
                    accepted.add(c)
                } catch (_: IOException) {
                    return@Thread
                }
            }
        }, "fake-server-accept").apply { isDaemon = true }.start()
    }

    /** The next connection (within [timeoutMillis]). */
    fun accept(timeoutMillis: Long = 5_000): FakeConn =
        accepted.poll(timeoutMillis, TimeUnit.MILLISECONDS) ?: throw AssertionError("no connection within $timeoutMillis ms")

    /** The next connection, after checking its first line is `H 1` and answering `H 1 <node>`. */
    fun acceptHello(node: String = "fake", expected: String = "H 1"): FakeConn {
        val c = accept()
        val line = c.readLine()
        if (line != expected) throw AssertionError("first line was \"$line\", expected \"$expected\"")
        c.send("H 1 $node")
        return c
    }

    /** No further connection within [millis]. */
    fun assertNoConnection(millis: Long) {
        val c = accepted.poll(millis, TimeUnit.MILLISECONDS)
        if (c != null) throw AssertionError("unexpected connection")
    }

    override fun close() {
        server.close()
        all.forEach { it.close() }
    }
}

class FakeConn(val socket: Socket) : AutoCloseable {
    private val input: InputStream = socket.getInputStream()

    /** Answer `P` with `P` while reading, instead of returning it. */
    @Volatile var autoPong = true

    /**
     * The next line without `\n` (pings answered, see [autoPong]), or null at end of stream. Fails
     * after [timeoutMillis] in all: pings do not restart it (a client pinging every 5 s kept a
     * 5 s expect reading for minutes).
     */
    fun readLine(timeoutMillis: Long = 5_000): String? {
        val deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis)
        while (true) {
            val left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())
            if (left <= 0) throw AssertionError("no line but pings within $timeoutMillis ms")
            val line = readAnyLine(left)
            if (line == "P" && autoPong) {
                send("P")
                continue
            }
            return line
        }
    }

    private fun readAnyLine(timeoutMillis: Long): String? {
        socket.soTimeout = timeoutMillis.toInt()
        val buf = ByteArrayOutputStream()
        try {
            while (true) {
                val b = input.read()
                if (b < 0) return if (buf.size() == 0) null else buf.toString(StandardCharsets.UTF_8)
                if (b == '\n'.code) return buf.toString(StandardCharsets.UTF_8)
                buf.write(b)
            }
        } catch (e: SocketTimeoutException) {
            throw AssertionError("no line within $timeoutMillis ms (partial: \"${buf.toString(StandardCharsets.UTF_8)}\")")
        } catch (e: IOException) {
            return null
        }
    }

    /** Reads the next line and checks it. */
    fun expect(line: String, timeoutMillis: Long = 5_000) {
        val got = readLine(timeoutMillis)
        if (got != line) throw AssertionError("expected \"$line\", got \"$got\"")
    }

    /** The client half-closed or closed: end of stream within [timeoutMillis]. */
    fun expectEof(timeoutMillis: Long = 5_000) {
        val got = readLine(timeoutMillis)
        if (got != null) throw AssertionError("expected end of stream, got \"$got\"")
    }

    /** Nothing arrives for [millis] (the connection stays open and silent). */
    fun expectSilence(millis: Long) {
        socket.soTimeout = millis.toInt()
        try {
            val b = input.read()
            throw AssertionError(if (b < 0) "connection closed" else "unexpected byte ${b.toChar()}")
        } catch (_: SocketTimeoutException) {
            // silent, as expected
        }
    }

    fun send(line: String) = sendRaw((line + "\n").toByteArray(StandardCharsets.UTF_8))

    fun sendRaw(bytes: ByteArray) {
        val out = socket.getOutputStream()
        out.write(bytes)
        out.flush()
    }

    /** Closes with a TCP reset (a broken connection, not a clean close). */
    fun reset() {
        try {
            socket.setSoLinger(true, 0)
        } catch (_: IOException) {
        }
        close()
    }

    override fun close() {
        try {
            socket.close()
        } catch (_: IOException) {
        }
    }
}
